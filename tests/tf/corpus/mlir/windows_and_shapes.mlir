"builtin.module"() <{sym_name = "jit_windows_and_shapes"}> ({
  "func.func"() <{arg_attrs = [{}, {}], function_type = (tensor<1x4x5x2xf32>, tensor<i32>) -> (tensor<1x2x5x2xf32>, tensor<40xf32>, tensor<5x7xf32>, tensor<1x2x3x2xf32>, tensor<1x4x5x2xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}, {jax.result_info = "result[2]"}, {jax.result_info = "result[3]"}, {jax.result_info = "result[4]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg10: tensor<1x4x5x2xf32>, %arg11: tensor<i32>):
    %20 = "stablehlo.constant"() <{value = dense<2> : tensor<i32>}> : () -> tensor<i32>
    %21 = "stablehlo.constant"() <{value = dense<5> : tensor<i32>}> : () -> tensor<i32>
    %22 = "stablehlo.constant"() <{value = dense<4> : tensor<i32>}> : () -> tensor<i32>
    %23 = "stablehlo.constant"() <{value = dense<1> : tensor<i32>}> : () -> tensor<i32>
    %24 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %25 = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> tensor<f32>
    %26 = "stablehlo.broadcast_in_dim"(%25) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<f32>
    %27 = "stablehlo.reduce_window"(%arg10, %26) <{padding = dense<[[0, 0], [0, 0], [0, 1], [0, 0]]> : tensor<4x2xi64>, window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 1, 1>}> ({
    ^bb0(%arg12: tensor<f32>, %arg13: tensor<f32>):
      %51 = "stablehlo.maximum"(%arg12, %arg13) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%51) : (tensor<f32>) -> ()
    }) : (tensor<1x4x5x2xf32>, tensor<f32>) -> tensor<1x2x5x2xf32>
    %28 = "stablehlo.reshape"(%arg10) : (tensor<1x4x5x2xf32>) -> tensor<40xf32>
    %29 = "func.call"(%28) <{callee = @sort}> : (tensor<40xf32>) -> tensor<40xf32>
    %30 = "stablehlo.slice"(%arg10) <{limit_indices = array<i64: 1, 4, 5, 1>, start_indices = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>}> : (tensor<1x4x5x2xf32>) -> tensor<1x4x5x1xf32>
    %31 = "stablehlo.reshape"(%30) : (tensor<1x4x5x1xf32>) -> tensor<4x5xf32>
    %32 = "func.call"(%31, %24) <{callee = @_pad}> : (tensor<4x5xf32>, tensor<i32>) -> tensor<5x7xf32>
    %33 = "stablehlo.slice"(%32) <{limit_indices = array<i64: 5, 7>, start_indices = array<i64: 0, 0>, strides = array<i64: 2, 1>}> : (tensor<5x7xf32>) -> tensor<3x7xf32>
    %34 = "func.call"(%32) <{callee = @_flip}> : (tensor<5x7xf32>) -> tensor<5x7xf32>
    %35 = "stablehlo.slice"(%34) <{limit_indices = array<i64: 3, 7>, start_indices = array<i64: 1, 0>, strides = array<i64: 1, 1>}> : (tensor<5x7xf32>) -> tensor<2x7xf32>
    %36 = "stablehlo.concatenate"(%33, %35) <{dimension = 0 : i64}> : (tensor<3x7xf32>, tensor<2x7xf32>) -> tensor<5x7xf32>
    %37 = "stablehlo.compare"(%24, %24) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %38 = "stablehlo.add"(%24, %23) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %39 = "stablehlo.select"(%37, %38, %24) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %40 = "stablehlo.compare"(%arg11, %24) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %41 = "stablehlo.add"(%arg11, %22) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %42 = "stablehlo.select"(%40, %41, %arg11) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %43 = "stablehlo.compare"(%24, %24) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %44 = "stablehlo.add"(%24, %21) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %45 = "stablehlo.select"(%43, %44, %24) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %46 = "stablehlo.compare"(%24, %24) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %47 = "stablehlo.add"(%24, %20) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %48 = "stablehlo.select"(%46, %47, %24) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %49 = "stablehlo.dynamic_slice"(%arg10, %39, %42, %45, %48) <{slice_sizes = array<i64: 1, 2, 3, 2>}> : (tensor<1x4x5x2xf32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x3x2xf32>
    %50 = "func.call"(%arg10) <{callee = @cumsum}> : (tensor<1x4x5x2xf32>) -> tensor<1x4x5x2xf32>
    "func.return"(%27, %29, %36, %49, %50) : (tensor<1x2x5x2xf32>, tensor<40xf32>, tensor<5x7xf32>, tensor<1x2x3x2xf32>, tensor<1x4x5x2xf32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}], function_type = (tensor<40xf32>) -> tensor<40xf32>, res_attrs = [{}], sym_name = "sort", sym_visibility = "private"}> ({
  ^bb0(%arg7: tensor<40xf32>):
    %8 = "stablehlo.constant"() <{value = dense<0x7FC00000> : tensor<f32>}> : () -> tensor<f32>
    %9 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %10 = "stablehlo.sort"(%arg7) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%arg8: tensor<f32>, %arg9: tensor<f32>):
      %11 = "stablehlo.compare"(%arg8, %9) <{compare_type = #stablehlo<comparison_type FLOAT>, comparison_direction = #stablehlo<comparison_direction EQ>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %12 = "stablehlo.select"(%11, %9, %arg8) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
      %13 = "stablehlo.compare"(%arg8, %arg8) <{compare_type = #stablehlo<comparison_type FLOAT>, comparison_direction = #stablehlo<comparison_direction NE>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %14 = "stablehlo.select"(%13, %8, %12) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
      %15 = "stablehlo.compare"(%arg9, %9) <{compare_type = #stablehlo<comparison_type FLOAT>, comparison_direction = #stablehlo<comparison_direction EQ>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %16 = "stablehlo.select"(%15, %9, %arg9) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
      %17 = "stablehlo.compare"(%arg9, %arg9) <{compare_type = #stablehlo<comparison_type FLOAT>, comparison_direction = #stablehlo<comparison_direction NE>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %18 = "stablehlo.select"(%17, %8, %16) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
      %19 = "stablehlo.compare"(%14, %18) <{compare_type = #stablehlo<comparison_type TOTALORDER>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
      "stablehlo.return"(%19) : (tensor<i1>) -> ()
    }) : (tensor<40xf32>) -> tensor<40xf32>
    "func.return"(%10) : (tensor<40xf32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}, {}], function_type = (tensor<4x5xf32>, tensor<i32>) -> tensor<5x7xf32>, res_attrs = [{}], sym_name = "_pad", sym_visibility = "private"}> ({
  ^bb0(%arg5: tensor<4x5xf32>, %arg6: tensor<i32>):
    %6 = "stablehlo.convert"(%arg6) : (tensor<i32>) -> tensor<f32>
    %7 = "stablehlo.pad"(%arg5, %6) <{edge_padding_high = array<i64: 0, 2>, edge_padding_low = array<i64: 1, 0>, interior_padding = array<i64: 0, 0>}> : (tensor<4x5xf32>, tensor<f32>) -> tensor<5x7xf32>
    "func.return"(%7) : (tensor<5x7xf32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}], function_type = (tensor<5x7xf32>) -> tensor<5x7xf32>, res_attrs = [{}], sym_name = "_flip", sym_visibility = "private"}> ({
  ^bb0(%arg4: tensor<5x7xf32>):
    %5 = "stablehlo.reverse"(%arg4) <{dimensions = array<i64: 1>}> : (tensor<5x7xf32>) -> tensor<5x7xf32>
    "func.return"(%5) : (tensor<5x7xf32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}], function_type = (tensor<1x4x5x2xf32>) -> tensor<1x4x5x2xf32>, res_attrs = [{}], sym_name = "cumsum", sym_visibility = "private"}> ({
  ^bb0(%arg3: tensor<1x4x5x2xf32>):
    %4 = "func.call"(%arg3) <{callee = @cumsum_0}> : (tensor<1x4x5x2xf32>) -> tensor<1x4x5x2xf32>
    "func.return"(%4) : (tensor<1x4x5x2xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<1x4x5x2xf32>) -> tensor<1x4x5x2xf32>, sym_name = "cumsum_0", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<1x4x5x2xf32>):
    %0 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %1 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<f32>
    %2 = "stablehlo.reduce_window"(%arg0, %1) <{padding = dense<[[0, 0], [0, 0], [4, 0], [0, 0]]> : tensor<4x2xi64>, window_dimensions = array<i64: 1, 1, 5, 1>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %3 = "stablehlo.add"(%arg1, %arg2) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%3) : (tensor<f32>) -> ()
    }) : (tensor<1x4x5x2xf32>, tensor<f32>) -> tensor<1x4x5x2xf32>
    "func.return"(%2) : (tensor<1x4x5x2xf32>) -> ()
  }) : () -> ()
}) {jax.uses_shape_polymorphism = false, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
