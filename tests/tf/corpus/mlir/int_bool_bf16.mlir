"builtin.module"() <{sym_name = "jit_int_bool_bf16"}> ({
  "func.func"() <{arg_attrs = [{}, {}, {}, {}], function_type = (tensor<6xi32>, tensor<6xi32>, tensor<6xi1>, tensor<6xbf16>) -> (tensor<6xi32>, tensor<6xi32>, tensor<6xf32>, tensor<6xi8>, tensor<6xi1>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}, {jax.result_info = "result[2]"}, {jax.result_info = "result[3]"}, {jax.result_info = "result[4]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg8: tensor<6xi32>, %arg9: tensor<6xi32>, %arg10: tensor<6xi1>, %arg11: tensor<6xbf16>):
    %20 = "stablehlo.constant"() <{value = dense<7> : tensor<ui32>}> : () -> tensor<ui32>
    %21 = "stablehlo.constant"() <{value = dense<1.000000e+00> : tensor<bf16>}> : () -> tensor<bf16>
    %22 = "stablehlo.constant"() <{value = dense<5.000000e-01> : tensor<bf16>}> : () -> tensor<bf16>
    %23 = "stablehlo.constant"() <{value = dense<3> : tensor<i32>}> : () -> tensor<i32>
    %24 = "stablehlo.constant"() <{value = dense<1> : tensor<i32>}> : () -> tensor<i32>
    %25 = "stablehlo.constant"() <{value = dense<2> : tensor<i32>}> : () -> tensor<i32>
    %26 = "stablehlo.broadcast_in_dim"(%25) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<6xi32>
    %27 = "stablehlo.shift_left"(%arg8, %26) : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
    %28 = "stablehlo.broadcast_in_dim"(%24) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<6xi32>
    %29 = "stablehlo.shift_right_arithmetic"(%arg9, %28) : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
    %30 = "stablehlo.xor"(%27, %29) : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
    %31 = "stablehlo.compare"(%arg8, %arg9) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction GT>}> : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %32 = "stablehlo.and"(%arg10, %31) : (tensor<6xi1>, tensor<6xi1>) -> tensor<6xi1>
    %33 = "func.call"(%arg8, %23) <{callee = @remainder}> : (tensor<6xi32>, tensor<i32>) -> tensor<6xi32>
    %34 = "stablehlo.negate"(%arg9) : (tensor<6xi32>) -> tensor<6xi32>
    %35 = "func.call"(%32, %33, %34) <{callee = @_where_0}> : (tensor<6xi1>, tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
    %36 = "stablehlo.broadcast_in_dim"(%22) <{broadcast_dimensions = array<i64>}> : (tensor<bf16>) -> tensor<6xbf16>
    %37 = "stablehlo.multiply"(%arg11, %36) : (tensor<6xbf16>, tensor<6xbf16>) -> tensor<6xbf16>
    %38 = "stablehlo.broadcast_in_dim"(%21) <{broadcast_dimensions = array<i64>}> : (tensor<bf16>) -> tensor<6xbf16>
    %39 = "stablehlo.add"(%37, %38) : (tensor<6xbf16>, tensor<6xbf16>) -> tensor<6xbf16>
    %40 = "stablehlo.convert"(%39) : (tensor<6xbf16>) -> tensor<6xf32>
    %41 = "stablehlo.convert"(%arg8) : (tensor<6xi32>) -> tensor<6xui32>
    %42 = "stablehlo.broadcast_in_dim"(%20) <{broadcast_dimensions = array<i64>}> : (tensor<ui32>) -> tensor<6xui32>
    %43 = "stablehlo.multiply"(%41, %42) : (tensor<6xui32>, tensor<6xui32>) -> tensor<6xui32>
    %44 = "stablehlo.convert"(%43) : (tensor<6xui32>) -> tensor<6xi8>
    %45 = "stablehlo.not"(%arg10) : (tensor<6xi1>) -> tensor<6xi1>
    "func.return"(%30, %35, %40, %44, %45) : (tensor<6xi32>, tensor<6xi32>, tensor<6xf32>, tensor<6xi8>, tensor<6xi1>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}, {}], function_type = (tensor<6xi32>, tensor<i32>) -> tensor<6xi32>, res_attrs = [{}], sym_name = "remainder", sym_visibility = "private"}> ({
  ^bb0(%arg6: tensor<6xi32>, %arg7: tensor<i32>):
    %2 = "stablehlo.constant"() <{value = dense<1> : tensor<i32>}> : () -> tensor<i32>
    %3 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %4 = "stablehlo.convert"(%arg7) : (tensor<i32>) -> tensor<i32>
    %5 = "stablehlo.compare"(%4, %3) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction EQ>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %6 = "func.call"(%5, %2, %4) <{callee = @_where}> : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %7 = "stablehlo.broadcast_in_dim"(%6) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<6xi32>
    %8 = "stablehlo.remainder"(%arg6, %7) : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
    %9 = "stablehlo.broadcast_in_dim"(%3) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<6xi32>
    %10 = "stablehlo.compare"(%8, %9) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction NE>}> : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %11 = "stablehlo.broadcast_in_dim"(%3) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<6xi32>
    %12 = "stablehlo.compare"(%8, %11) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
    %13 = "stablehlo.compare"(%6, %3) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %14 = "stablehlo.broadcast_in_dim"(%13) <{broadcast_dimensions = array<i64>}> : (tensor<i1>) -> tensor<6xi1>
    %15 = "stablehlo.compare"(%12, %14) <{compare_type = #stablehlo<comparison_type UNSIGNED>, comparison_direction = #stablehlo<comparison_direction NE>}> : (tensor<6xi1>, tensor<6xi1>) -> tensor<6xi1>
    %16 = "stablehlo.and"(%15, %10) : (tensor<6xi1>, tensor<6xi1>) -> tensor<6xi1>
    %17 = "stablehlo.broadcast_in_dim"(%6) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<6xi32>
    %18 = "stablehlo.add"(%8, %17) : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
    %19 = "stablehlo.select"(%16, %18, %8) : (tensor<6xi1>, tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
    "func.return"(%19) : (tensor<6xi32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}, {}, {}], function_type = (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>, res_attrs = [{}], sym_name = "_where", sym_visibility = "private"}> ({
  ^bb0(%arg3: tensor<i1>, %arg4: tensor<i32>, %arg5: tensor<i32>):
    %1 = "stablehlo.select"(%arg3, %arg4, %arg5) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    "func.return"(%1) : (tensor<i32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}, {}, {}], function_type = (tensor<6xi1>, tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>, res_attrs = [{}], sym_name = "_where_0", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<6xi1>, %arg1: tensor<6xi32>, %arg2: tensor<6xi32>):
    %0 = "stablehlo.select"(%arg0, %arg1, %arg2) : (tensor<6xi1>, tensor<6xi32>, tensor<6xi32>) -> tensor<6xi32>
    "func.return"(%0) : (tensor<6xi32>) -> ()
  }) : () -> ()
}) {jax.uses_shape_polymorphism = false, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
