"builtin.module"() <{sym_name = "jit_conv"}> ({
  "func.func"() <{arg_attrs = [{}, {}], function_type = (tensor<1x6x5x2xf32>, tensor<3x2x2x4xf32>) -> tensor<1x3x4x4xf32>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<1x6x5x2xf32>, %arg1: tensor<3x2x2x4xf32>):
    %0 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %1 = "stablehlo.convolution"(%arg0, %arg1) <{batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, feature_group_count = 1 : i64, padding = dense<[[1, 1], [0, 1]]> : tensor<2x2xi64>, rhs_dilation = array<i64: 1, 2>, window_strides = array<i64: 2, 1>}> : (tensor<1x6x5x2xf32>, tensor<3x2x2x4xf32>) -> tensor<1x3x4x4xf32>
    %2 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x3x4x4xf32>
    %3 = "stablehlo.maximum"(%1, %2) : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
    "func.return"(%3) : (tensor<1x3x4x4xf32>) -> ()
  }) : () -> ()
}) {jax.uses_shape_polymorphism = false, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
