"builtin.module"() <{sym_name = "jit_mlp_step"}> ({
  "func.func"() <{arg_attrs = [{}, {}, {}, {}, {}], function_type = (tensor<4x8xf32>, tensor<8xf32>, tensor<8x2xf32>, tensor<3x4xf32>, tensor<3x2xf32>) -> (tensor<f32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8x2xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1][0]"}, {jax.result_info = "result[1][1]"}, {jax.result_info = "result[1][2]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<8xf32>, %arg2: tensor<8x2xf32>, %arg3: tensor<3x4xf32>, %arg4: tensor<3x2xf32>):
    %0 = "stablehlo.constant"() <{value = dense<1.000000e-01> : tensor<f32>}> : () -> tensor<f32>
    %1 = "stablehlo.constant"() <{value = dense<6.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %2 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %3 = "stablehlo.constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %4 = "stablehlo.constant"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %5 = "stablehlo.dot_general"(%arg3, %arg0) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<3x4xf32>, tensor<4x8xf32>) -> tensor<3x8xf32>
    %6 = "stablehlo.broadcast_in_dim"(%arg1) <{broadcast_dimensions = array<i64: 1>}> : (tensor<8xf32>) -> tensor<1x8xf32>
    %7 = "stablehlo.broadcast_in_dim"(%6) <{broadcast_dimensions = array<i64: 0, 1>}> : (tensor<1x8xf32>) -> tensor<3x8xf32>
    %8 = "stablehlo.add"(%5, %7) : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
    %9 = "stablehlo.tanh"(%8) : (tensor<3x8xf32>) -> tensor<3x8xf32>
    %10 = "stablehlo.broadcast_in_dim"(%4) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<3x8xf32>
    %11 = "stablehlo.subtract"(%10, %9) : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
    %12 = "stablehlo.dot_general"(%9, %arg2) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<3x8xf32>, tensor<8x2xf32>) -> tensor<3x2xf32>
    %13 = "stablehlo.subtract"(%12, %arg4) : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %14 = "stablehlo.multiply"(%13, %13) : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %15 = "stablehlo.broadcast_in_dim"(%3) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<3x2xf32>
    %16 = "stablehlo.multiply"(%15, %13) : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %17 = "stablehlo.reduce"(%14, %2) <{dimensions = array<i64: 0, 1>}> ({
    ^bb0(%arg9: tensor<f32>, %arg10: tensor<f32>):
      %44 = "stablehlo.add"(%arg9, %arg10) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%44) : (tensor<f32>) -> ()
    }) : (tensor<3x2xf32>, tensor<f32>) -> tensor<f32>
    %18 = "stablehlo.divide"(%17, %1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %19 = "stablehlo.divide"(%4, %1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %20 = "stablehlo.broadcast_in_dim"(%19) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<3x2xf32>
    %21 = "stablehlo.multiply"(%20, %16) : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %22 = "stablehlo.dot_general"(%21, %9) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>}> : (tensor<3x2xf32>, tensor<3x8xf32>) -> tensor<2x8xf32>
    %23 = "stablehlo.transpose"(%22) <{permutation = array<i64: 1, 0>}> : (tensor<2x8xf32>) -> tensor<8x2xf32>
    %24 = "stablehlo.dot_general"(%21, %arg2) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>}> : (tensor<3x2xf32>, tensor<8x2xf32>) -> tensor<3x8xf32>
    %25 = "stablehlo.multiply"(%24, %11) : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
    %26 = "stablehlo.multiply"(%25, %9) : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
    %27 = "stablehlo.add"(%25, %26) : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
    %28 = "stablehlo.reduce"(%27, %2) <{dimensions = array<i64: 0>}> ({
    ^bb0(%arg7: tensor<f32>, %arg8: tensor<f32>):
      %43 = "stablehlo.add"(%arg7, %arg8) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%43) : (tensor<f32>) -> ()
    }) : (tensor<3x8xf32>, tensor<f32>) -> tensor<8xf32>
    %29 = "stablehlo.reshape"(%28) : (tensor<8xf32>) -> tensor<1x8xf32>
    %30 = "stablehlo.reduce"(%29, %2) <{dimensions = array<i64: 0>}> ({
    ^bb0(%arg5: tensor<f32>, %arg6: tensor<f32>):
      %42 = "stablehlo.add"(%arg5, %arg6) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%42) : (tensor<f32>) -> ()
    }) : (tensor<1x8xf32>, tensor<f32>) -> tensor<8xf32>
    %31 = "stablehlo.dot_general"(%27, %arg3) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>}> : (tensor<3x8xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
    %32 = "stablehlo.transpose"(%31) <{permutation = array<i64: 1, 0>}> : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %33 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4x8xf32>
    %34 = "stablehlo.multiply"(%33, %32) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %35 = "stablehlo.subtract"(%arg0, %34) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %36 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<8xf32>
    %37 = "stablehlo.multiply"(%36, %30) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %38 = "stablehlo.subtract"(%arg1, %37) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %39 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<8x2xf32>
    %40 = "stablehlo.multiply"(%39, %23) : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
    %41 = "stablehlo.subtract"(%arg2, %40) : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
    "func.return"(%18, %35, %38, %41) : (tensor<f32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8x2xf32>) -> ()
  }) : () -> ()
}) {jax.uses_shape_polymorphism = false, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
