//! Finite-difference checks of every gradient function, run with the executor.
//!
//! Each case is a small `.opg` graph: f64 placeholders, the op under test producing `%out`, and a
//! scalar loss `Sum(%out * W)` with fixed pseudo-random weights `W` (so every output element has
//! its own non-trivial gradient). A `gradients(ys = [%loss], xs = [...])` call is expanded by the
//! pass, and `Identity` nodes reading its outputs give the gradients stable names to fetch. The
//! expanded graph runs on a one-graph [`Mesh`]; the fetched gradients are compared with central
//! differences of the loss computed by the same executor, on random inputs from proptest.
//!
//! Second-order cases differentiate `Sum(dloss/dx * V)` once more, so the gradient functions of
//! the gradient ops (TanhGrad, Mul, ...) are checked as well.

use crate::support::gradcheck;

use gradcheck::*;

// Identity-like ops and sums.

#[test]
fn identity() {
    check(case("identity", vec![input("a", &[2, 3])], unary("Identity"), &[2, 3]));
}

#[test]
fn snapshot() {
    check(case("snapshot", vec![input("a", &[3])], unary("Snapshot"), &[3]));
}

#[test]
fn add_n_with_a_repeated_input() {
    let forward = "%out = AddN(%a, %b, %a) {N = 3, T = f64}";
    check(case("add_n", vec![input("a", &[2, 2]), input("b", &[2, 2])], forward, &[2, 2]));
}

#[test]
fn neg() {
    check(case("neg", vec![input("a", &[2, 3])], unary("Neg"), &[2, 3]));
}

// Binary elementwise ops, with broadcasting.

#[test]
fn add_same_shape() {
    check(case("add", vec![input("a", &[2, 3]), input("b", &[2, 3])], binary("Add"), &[2, 3]));
}

#[test]
fn add_v2_broadcasts_a_row() {
    check(case("add_v2_row", vec![input("a", &[2, 3]), input("b", &[3])], binary("AddV2"), &[2, 3]));
}

#[test]
fn add_v2_broadcasts_both_sides() {
    check(case("add_v2_both", vec![input("a", &[2, 1]), input("b", &[1, 3])], binary("AddV2"), &[2, 3]));
}

#[test]
fn add_v2_scalar() {
    check(case("add_v2_scalar", vec![input("a", &[]), input("b", &[2, 3])], binary("AddV2"), &[2, 3]));
}

#[test]
fn sub_broadcasts_the_first_operand() {
    check(case("sub", vec![input("a", &[3]), input("b", &[2, 3])], binary("Sub"), &[2, 3]));
}

#[test]
fn mul_same_shape() {
    check(case("mul", vec![input("a", &[2, 3]), input("b", &[2, 3])], binary("Mul"), &[2, 3]));
}

#[test]
fn mul_broadcasts_over_rank_three() {
    check(case("mul_rank3", vec![input("a", &[2, 3, 4]), input("b", &[3, 1])], binary("Mul"), &[2, 3, 4]));
}

#[test]
fn real_div() {
    let inputs = vec![input("a", &[2, 3]), input_in("b", &[2, 3], Domain::Positive)];
    check(case("real_div", inputs, binary("RealDiv"), &[2, 3]));
}

#[test]
fn real_div_broadcasts_the_denominator() {
    let inputs = vec![input("a", &[2, 3]), input_in("b", &[3], Domain::Positive)];
    check(case("real_div_row", inputs, binary("RealDiv"), &[2, 3]));
}

#[test]
fn maximum() {
    let inputs = vec![input_in("a", &[2, 3], Domain::Lattice(0)), input_in("b", &[2, 3], Domain::Lattice(1))];
    check(case("maximum", inputs, binary("Maximum"), &[2, 3]));
}

#[test]
fn maximum_broadcasts() {
    let inputs = vec![input_in("a", &[2, 3], Domain::Lattice(0)), input_in("b", &[3], Domain::Lattice(1))];
    check(case("maximum_row", inputs, binary("Maximum"), &[2, 3]));
}

#[test]
fn minimum_broadcasts() {
    let inputs = vec![input_in("a", &[2, 1], Domain::Lattice(1)), input_in("b", &[2, 3], Domain::Lattice(0))];
    check(case("minimum", inputs, binary("Minimum"), &[2, 3]));
}

#[test]
fn select_v2_broadcasts() {
    let forward = "%cond = Const() {dtype = bool, value = tensor(bool, [3]) [true, false, true]}\n\
                   %out = SelectV2(%cond, %a, %b) {T = f64}";
    check(case("select_v2", vec![input("a", &[2, 3]), input("b", &[2, 1])], forward, &[2, 3]));
}

// Unary math.

#[test]
fn square() {
    check(case("square", vec![input("a", &[2, 3])], unary("Square"), &[2, 3]));
}

#[test]
fn relu() {
    check(case("relu", vec![input_in("a", &[2, 3], Domain::AwayFromZero)], unary("Relu"), &[2, 3]));
}

#[test]
fn tanh() {
    check(case("tanh", vec![input("a", &[2, 3])], unary("Tanh"), &[2, 3]));
}

#[test]
fn sigmoid() {
    check(case("sigmoid", vec![input("a", &[2, 3])], unary("Sigmoid"), &[2, 3]));
}

#[test]
fn exp() {
    check(case("exp", vec![input("a", &[2, 3])], unary("Exp"), &[2, 3]));
}

#[test]
fn log() {
    check(case("log", vec![input_in("a", &[2, 3], Domain::Positive)], unary("Log"), &[2, 3]));
}

#[test]
fn reciprocal() {
    check(case("reciprocal", vec![input_in("a", &[2, 3], Domain::Positive)], unary("Reciprocal"), &[2, 3]));
}

#[test]
fn softmax() {
    check(case("softmax", vec![input("a", &[2, 4])], unary("Softmax"), &[2, 4]));
}

#[test]
fn softmax_rank_three() {
    check(case("softmax_rank3", vec![input("a", &[2, 2, 3])], unary("Softmax"), &[2, 2, 3]));
}

// Gradient ops, differentiated directly (both of their inputs).

#[test]
fn relu_grad() {
    let inputs = vec![input("a", &[2, 3]), input_in("b", &[2, 3], Domain::AwayFromZero)];
    check(case("relu_grad", inputs, binary("ReluGrad"), &[2, 3]));
}

#[test]
fn tanh_grad() {
    check(case("tanh_grad", vec![input("a", &[2, 3]), input("b", &[2, 3])], binary("TanhGrad"), &[2, 3]));
}

#[test]
fn sigmoid_grad() {
    check(case("sigmoid_grad", vec![input("a", &[2, 3]), input("b", &[2, 3])], binary("SigmoidGrad"), &[2, 3]));
}

#[test]
fn bias_add_grad() {
    let forward = "%out = BiasAddGrad(%a) {T = f64}";
    check(case("bias_add_grad", vec![input("a", &[4, 3])], forward, &[3]));
}

// Matrix products.

fn matmul_case(name: &'static str, op: &str, (ta, tb): (bool, bool), a: &[usize], b: &[usize], out: &[usize]) -> Case {
    let (ka, kb) = if op == "MatMul" { ("transpose_a", "transpose_b") } else { ("adj_x", "adj_y") };
    let forward = format!("%out = {op}(%a, %b) {{T = f64, {ka} = {ta}, {kb} = {tb}}}");
    case(name, vec![input("a", a), input("b", b)], forward, out)
}

#[test]
fn matmul() {
    check(matmul_case("matmul", "MatMul", (false, false), &[2, 3], &[3, 4], &[2, 4]));
}

#[test]
fn matmul_transpose_a() {
    check(matmul_case("matmul_ta", "MatMul", (true, false), &[3, 2], &[3, 4], &[2, 4]));
}

#[test]
fn matmul_transpose_b() {
    check(matmul_case("matmul_tb", "MatMul", (false, true), &[2, 3], &[4, 3], &[2, 4]));
}

#[test]
fn matmul_transpose_both() {
    check(matmul_case("matmul_tab", "MatMul", (true, true), &[3, 2], &[4, 3], &[2, 4]));
}

#[test]
fn batch_matmul() {
    check(matmul_case("bmm", "BatchMatMul", (false, false), &[2, 2, 3], &[2, 3, 2], &[2, 2, 2]));
}

#[test]
fn batch_matmul_adjoint_x() {
    check(matmul_case("bmm_ax", "BatchMatMul", (true, false), &[2, 3, 2], &[2, 3, 2], &[2, 2, 2]));
}

#[test]
fn batch_matmul_v2_adjoint_y() {
    check(matmul_case("bmm2_ay", "BatchMatMulV2", (false, true), &[2, 2, 3], &[2, 4, 3], &[2, 2, 4]));
}

#[test]
fn batch_matmul_v2_adjoint_both() {
    check(matmul_case("bmm2_axy", "BatchMatMulV2", (true, true), &[2, 3, 2], &[2, 4, 3], &[2, 2, 4]));
}

#[test]
fn batch_matmul_v2_broadcasts_batch_dims() {
    check(matmul_case("bmm2_bcast", "BatchMatMulV2", (false, false), &[2, 1, 2, 3], &[3, 3, 2], &[2, 3, 2, 2]));
}

#[test]
fn batch_matmul_v2_with_a_matrix() {
    check(matmul_case("bmm2_matrix", "BatchMatMulV2", (false, true), &[3, 2, 3], &[4, 3], &[3, 2, 4]));
}

// Reductions.

#[test]
fn sum_over_one_axis() {
    let forward = i32_const("axes", &[1], &[1]) + "%out = Sum(%a, %axes) {T = f64, keep_dims = false}";
    check(case("sum_axis1", vec![input("a", &[2, 3, 2])], forward, &[2, 2]));
}

#[test]
fn sum_with_a_scalar_negative_axis_kept() {
    let forward = i32_const("axes", &[], &[-1]) + "%out = Sum(%a, %axes) {T = f64, keep_dims = true}";
    check(case("sum_neg_keep", vec![input("a", &[2, 3])], forward, &[2, 1]));
}

#[test]
fn sum_over_every_axis() {
    let forward = i32_const("axes", &[2], &[0, 1]) + "%out = Sum(%a, %axes) {T = f64, keep_dims = false}";
    check(case("sum_all", vec![input("a", &[2, 3])], forward, &[]));
}

#[test]
fn sum_with_i64_axes() {
    let forward = "%axes = Const() {dtype = i64, value = tensor(i64, [1]) [0]}\n\
                   %out = Sum(%a, %axes) {T = f64, Tidx = i64, keep_dims = false}";
    check(case("sum_i64_axes", vec![input("a", &[2, 3])], forward, &[3]));
}

#[test]
fn mean_over_one_axis() {
    let forward = i32_const("axes", &[1], &[0]) + "%out = Mean(%a, %axes) {T = f64, keep_dims = false}";
    check(case("mean_axis0", vec![input("a", &[3, 2])], forward, &[2]));
}

#[test]
fn mean_over_two_axes_kept() {
    let forward = i32_const("axes", &[2], &[0, 2]) + "%out = Mean(%a, %axes) {T = f64, keep_dims = true}";
    check(case("mean_keep", vec![input("a", &[2, 3, 2])], forward, &[1, 3, 1]));
}

// Shapes.

#[test]
fn reshape() {
    let forward = i32_const("shape", &[2], &[3, -1]) + "%out = Reshape(%a, %shape) {T = f64}";
    check(case("reshape", vec![input("a", &[2, 3])], forward, &[3, 2]));
}

#[test]
fn transpose() {
    let forward = i32_const("perm", &[3], &[2, 0, 1]) + "%out = Transpose(%a, %perm) {T = f64}";
    check(case("transpose", vec![input("a", &[2, 3, 4])], forward, &[4, 2, 3]));
}

#[test]
fn tile() {
    let forward = i32_const("multiples", &[2], &[2, 3]) + "%out = Tile(%a, %multiples) {T = f64}";
    check(case("tile", vec![input("a", &[2, 2])], forward, &[4, 6]));
}

#[test]
fn tile_rank_three() {
    let forward = i32_const("multiples", &[3], &[1, 2, 2]) + "%out = Tile(%a, %multiples) {T = f64}";
    check(case("tile_rank3", vec![input("a", &[2, 1, 3])], forward, &[2, 2, 6]));
}

#[test]
fn broadcast_to() {
    let forward = i32_const("shape", &[3], &[2, 3, 2]) + "%out = BroadcastTo(%a, %shape) {T = f64}";
    check(case("broadcast_to", vec![input("a", &[3, 1])], forward, &[2, 3, 2]));
}

#[test]
fn fill_value() {
    let forward = i32_const("dims", &[2], &[2, 3]) + "%out = Fill(%dims, %a) {T = f64}";
    check(case("fill", vec![input("a", &[])], forward, &[2, 3]));
}

#[test]
fn bias_add() {
    let forward = "%out = BiasAdd(%a, %b) {T = f64}";
    check(case("bias_add", vec![input("a", &[4, 3]), input("b", &[3])], forward, &[4, 3]));
}

#[test]
fn bias_add_rank_three() {
    let forward = "%out = BiasAdd(%a, %b) {T = f64, data_format = \"NHWC\"}";
    check(case("bias_add_rank3", vec![input("a", &[2, 2, 3]), input("b", &[3])], forward, &[2, 2, 3]));
}

#[test]
fn bias_add_channels_first() {
    let forward = "%out = BiasAdd(%a, %b) {T = f64, data_format = \"NCHW\"}";
    check(case("bias_add_nchw", vec![input("a", &[2, 3, 2]), input("b", &[3])], forward, &[2, 3, 2]));
}

#[test]
fn cast_through_f32() {
    // The round trip through f32 is a step function at f32 resolution (~1e-7), so the
    // difference step is large; the function is linear, so the step adds no error of its own.
    let forward = "%narrow = Cast(%a) {SrcT = f64, DstT = f32}\n\
                   %out = Cast(%narrow) {SrcT = f32, DstT = f64}";
    check(case("cast", vec![input("a", &[2, 3])], forward, &[2, 3]).step(1e-2));
}

#[test]
fn cross_replica_sum_of_one_replica() {
    let forward = i32_const("groups", &[1, 1], &[0]) + "%out = CrossReplicaSum(%a, %groups) {T = f64}";
    check(case("cross_replica_sum", vec![input("a", &[2, 3])], forward, &[2, 3]));
}

// Compositions: several paths into one tensor (AddN), stop gradients.

#[test]
fn shared_input_sums_its_gradients() {
    let forward = "%t = Tanh(%a) {T = f64}\n\
                   %m = Mul(%t, %a) {T = f64}\n\
                   %out = AddV2(%m, %b) {T = f64}";
    check(case("shared", vec![input("a", &[2, 3]), input("b", &[3])], forward, &[2, 3]));
}

#[test]
fn stop_gradient_blocks_one_path() {
    // loss = sum(StopGradient(a) * a * w): only the second operand is differentiated, so the
    // gradient is StopGradient(a) * w = a * w (finite differences would see 2 a w).
    let forward = "%s = StopGradient(%a) {T = f64}\n%out = Mul(%s, %a) {T = f64}";
    let case = case("stop_gradient", vec![input("a", &[3])], forward, &[3]);
    let mesh = mesh_of(&case);
    let a = vec![0.5, -1.0, 2.0];
    let fetched = mesh.run_step(&feeds(&case, std::slice::from_ref(&a)), &[Fetch::new("main", "grad_0")]).unwrap();
    let w = weight_values(&[3], &mut ChaCha8Rng::seed_from_u64(seed_of("stop_gradient")));
    let expected: Vec<f64> = a.iter().zip(&w).map(|(a, w)| a * w).collect();
    let got = fetched[0].to_vec::<f64>().unwrap();
    for (g, e) in got.iter().zip(&expected) {
        assert!(relative_error(*g, *e) < TOLERANCE, "got {got:?}, expected {expected:?}");
    }
}

// Second order: the gradient functions of the gradient ops.

#[test]
fn second_order_tanh() {
    check(case("tanh2", vec![input("a", &[2, 3])], unary("Tanh"), &[2, 3]).second_order());
}

#[test]
fn second_order_sigmoid() {
    check(case("sigmoid2", vec![input("a", &[2, 3])], unary("Sigmoid"), &[2, 3]).second_order());
}

#[test]
fn second_order_square() {
    check(case("square2", vec![input("a", &[2, 3])], unary("Square"), &[2, 3]).second_order());
}

#[test]
fn second_order_mul() {
    check(case("mul2", vec![input("a", &[2, 3]), input("b", &[3])], binary("Mul"), &[2, 3]).second_order());
}

#[test]
fn second_order_mul_with_itself() {
    let forward = "%m = Mul(%a, %a) {T = f64}\n%out = Mul(%m, %b) {T = f64}";
    check(case("mul_self2", vec![input("a", &[2, 3]), input("b", &[2, 1])], forward, &[2, 3]).second_order());
}

#[test]
fn second_order_tanh_of_matmul() {
    let forward = "%m = MatMul(%a, %b) {T = f64}\n%out = Tanh(%m) {T = f64}";
    check(case("tanh_matmul2", vec![input("a", &[2, 3]), input("b", &[3, 2])], forward, &[2, 2]).second_order());
}

#[test]
fn second_order_softmax_and_log() {
    let forward = "%s = Softmax(%a) {T = f64}\n%out = Log(%s) {T = f64}";
    check(case("softmax_log2", vec![input("a", &[2, 3])], forward, &[2, 3]).second_order());
}

#[test]
fn second_order_relu_with_mean() {
    let forward = i32_const("axes", &[1], &[1])
        + "%r = Relu(%a) {T = f64}\n%sq = Square(%r) {T = f64}\n%out = Mean(%sq, %axes) {T = f64, keep_dims = false}";
    check(case("relu_mean2", vec![input_in("a", &[2, 3], Domain::AwayFromZero)], forward, &[2]).second_order());
}

// An MLP-like forward pass over variables, in f32 and f64.

/// `x [4, 3] -> Relu(BiasAdd(MatMul(x, w1), b1)) -> BiasAdd(MatMul(., w2), b2) -> [4, 2]`, loss
/// `Mean(Square(out - y))`, differentiated with respect to the four variable reads.
fn mlp_source(dtype: &str) -> String {
    let var = |name: &str, shape: &[usize]| {
        format!(
            "  %{name} = VarHandleOp() {{dtype = {dtype}, shape = {}, shared_name = \"{name}\"}}\n  \
             %read_{name} = ReadVariableOp(%{name}) {{dtype = {dtype}}}\n",
            shape_attr(shape)
        )
    };
    format!(
        "graph @main {{\n  \
         %x = Placeholder() {{dtype = {dtype}, shape = shape[4, 3]}}\n  \
         %y = Placeholder() {{dtype = {dtype}, shape = shape[4, 2]}}\n\
         {}{}{}{}  \
         %mm1 = MatMul(%x, %read_w1) {{T = {dtype}}}\n  \
         %h1 = BiasAdd(%mm1, %read_b1) {{T = {dtype}}}\n  \
         %a1 = Relu(%h1) {{T = {dtype}}}\n  \
         %mm2 = MatMul(%a1, %read_w2) {{T = {dtype}}}\n  \
         %out = BiasAdd(%mm2, %read_b2) {{T = {dtype}}}\n  \
         %diff = Sub(%out, %y) {{T = {dtype}}}\n  \
         %sq = Square(%diff) {{T = {dtype}}}\n  \
         %axes = Const() {{dtype = i32, value = tensor(i32, [2]) [0, 1]}}\n  \
         %loss = Mean(%sq, %axes) {{T = {dtype}, keep_dims = false}}\n  \
         %g = gradients(ys = [%loss], xs = [%read_w1, %read_b1, %read_w2, %read_b2])\n  \
         %grad_w1 = Identity(%g:0) {{T = {dtype}}}\n  \
         %grad_b1 = Identity(%g:1) {{T = {dtype}}}\n  \
         %grad_w2 = Identity(%g:2) {{T = {dtype}}}\n  \
         %grad_b2 = Identity(%g:3) {{T = {dtype}}}\n\
         }}\n",
        var("w1", &[3, 5]),
        var("b1", &[5]),
        var("w2", &[5, 2]),
        var("b2", &[2]),
    )
}

/// The MLP's parameters and data: (name, shape, values).
fn mlp_values() -> Vec<(&'static str, Vec<usize>, Vec<f64>)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed_of("mlp"));
    [("x", vec![4, 3]), ("y", vec![4, 2]), ("w1", vec![3, 5]), ("b1", vec![5]), ("w2", vec![5, 2]), ("b2", vec![2])]
        .into_iter()
        .map(|(name, shape)| {
            let values = weight_values(&shape, &mut rng);
            (name, shape, values)
        })
        .collect()
}

type Matrix = ndarray::Array2<f64>;

/// The MLP's gradients `[w1, b1, w2, b2]`, by the hand-written backward pass, and its loss.
fn mlp_reference(values: &[(&str, Vec<usize>, Vec<f64>)]) -> (Vec<Vec<f64>>, f64) {
    let get = |name: &str| values.iter().find(|v| v.0 == name).expect("a parameter");
    let matrix = |name: &str| {
        let (_, shape, v) = get(name);
        let (rows, cols) = if shape.len() == 2 { (shape[0], shape[1]) } else { (1, shape[0]) };
        Matrix::from_shape_vec((rows, cols), v.clone()).expect("values fill the shape")
    };
    let (x, y, w1, b1, w2, b2) = (matrix("x"), matrix("y"), matrix("w1"), matrix("b1"), matrix("w2"), matrix("b2"));
    let h1 = x.dot(&w1) + &b1;
    let a1 = h1.mapv(|v| v.max(0.0));
    let out = a1.dot(&w2) + &b2;
    let diff = &out - &y;
    let count = diff.len() as f64;
    let loss = diff.mapv(|v| v * v).sum() / count;
    let d_out = diff.mapv(|v| 2.0 * v / count);
    let d_w2 = a1.t().dot(&d_out);
    let d_b2 = d_out.sum_axis(ndarray::Axis(0));
    let d_a1 = d_out.dot(&w2.t());
    let d_h1 = ndarray::Zip::from(&d_a1).and(&h1).map_collect(|&d, &h| if h > 0.0 { d } else { 0.0 });
    let d_w1 = x.t().dot(&d_h1);
    let d_b1 = d_h1.sum_axis(ndarray::Axis(0));
    let flat = |m: ndarray::ArrayView<f64, _>| m.iter().copied().collect::<Vec<f64>>();
    (
        vec![
            flat(d_w1.view().into_dyn()),
            flat(d_b1.view().into_dyn()),
            flat(d_w2.view().into_dyn()),
            flat(d_b2.view().into_dyn()),
        ],
        loss,
    )
}

/// Builds the MLP in `dtype`, loads the values, and returns the mesh with the feeds.
fn mlp_mesh(dtype: DType, values: &[(&str, Vec<usize>, Vec<f64>)]) -> (Mesh, Feeds) {
    let name = if dtype == DType::F64 { "f64" } else { "f32" };
    let text = mlp_source(name);
    let (mut module, ir_errors) = parse_module(text.as_bytes()).expect("the MLP parses");
    assert!(ir_errors.is_empty(), "the MLP is valid IR: {ir_errors:?}");
    for graph in &mut module.graphs {
        let errors = expand_gradients(graph, &GradientsConfig::default());
        assert!(errors.is_empty(), "the MLP's gradients expand cleanly: {errors:?}");
    }
    let mesh = Mesh::new(&module, MeshConfig::default()).expect("the expanded MLP runs");
    let tensor = |shape: &[usize], v: &[f64]| match dtype {
        DType::F64 => Tensor::from_vec(shape, v.to_vec()),
        _ => Tensor::from_vec(shape, v.iter().map(|&x| x as f32).collect()),
    };
    let mut feeds = Feeds::new();
    for (name, shape, v) in values {
        let t = tensor(shape, v).expect("values fill the shape");
        if matches!(*name, "x" | "y") {
            feeds.insert("main", *name, t);
        } else {
            mesh.set_variable("main", name, t).expect("the graph exists");
        }
    }
    (mesh, feeds)
}

const MLP_GRADS: [&str; 4] = ["grad_w1", "grad_b1", "grad_w2", "grad_b2"];

fn mlp_gradients(mesh: &Mesh, feeds: &Feeds) -> Vec<Vec<f64>> {
    let fetches: Vec<Fetch> = MLP_GRADS.iter().map(|g| Fetch::new("main", *g)).collect();
    let out = mesh.run_step(feeds, &fetches).expect("the MLP step runs");
    out.iter()
        .map(|t| match t.dtype() {
            DType::F64 => t.to_vec::<f64>().expect("f64"),
            _ => t.to_vec::<f32>().expect("f32").into_iter().map(f64::from).collect(),
        })
        .collect()
}

fn assert_close(what: &str, got: &[Vec<f64>], expected: &[Vec<f64>], tolerance: f64) {
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(g.len(), e.len(), "{what}: {} has the parameter's size", MLP_GRADS[i]);
        for (j, (&a, &b)) in g.iter().zip(e).enumerate() {
            let err = relative_error(a, b);
            assert!(err < tolerance, "{what}: {}[{j}]: {a} vs {b} (relative error {err:.2e})", MLP_GRADS[i]);
        }
    }
}

#[test]
fn mlp_gradients_match_the_hand_written_backward_pass_in_f64() {
    let values = mlp_values();
    let (expected, _) = mlp_reference(&values);
    let (mesh, feeds) = mlp_mesh(DType::F64, &values);
    assert_close("f64", &mlp_gradients(&mesh, &feeds), &expected, 1e-9);
}

#[test]
fn mlp_gradients_match_the_hand_written_backward_pass_in_f32() {
    let values = mlp_values();
    let (expected, _) = mlp_reference(&values);
    let (mesh, feeds) = mlp_mesh(DType::F32, &values);
    assert_close("f32", &mlp_gradients(&mesh, &feeds), &expected, 1e-4);
}

#[test]
fn mlp_gradients_match_finite_differences_of_the_variables() {
    let values = mlp_values();
    let (mesh, feeds) = mlp_mesh(DType::F64, &values);
    let analytic = mlp_gradients(&mesh, &feeds);
    let step = 1e-5;
    for (k, var) in ["w1", "b1", "w2", "b2"].into_iter().enumerate() {
        let (_, shape, base) = values.iter().find(|v| v.0 == var).expect("a variable").clone();
        for (j, &a) in analytic[k].iter().enumerate() {
            let loss_at = |delta: f64| {
                let mut moved = base.clone();
                moved[j] += delta;
                mesh.set_variable("main", var, Tensor::from_vec(&shape, moved).expect("fits")).expect("exists");
                let out = mesh.run_step(&feeds, &[Fetch::new("main", "loss")]).expect("the loss runs");
                scalar_f64(&out[0])
            };
            let numeric = (loss_at(step) - loss_at(-step)) / (2.0 * step);
            let err = relative_error(a, numeric);
            assert!(err < TOLERANCE, "d loss / d {var}[{j}]: analytic {a} vs numeric {numeric} ({err:.2e})");
        }
        mesh.set_variable("main", var, Tensor::from_vec(&shape, base).expect("fits")).expect("exists");
    }
    // The reference's loss agrees with the executor's.
    let (_, loss) = mlp_reference(&values);
    let out = mesh.run_step(&feeds, &[Fetch::new("main", "loss")]).expect("the loss runs");
    assert!(relative_error(scalar_f64(&out[0]), loss) < 1e-12);
}

// The training-step families: activations, losses, layout, gathers, conv and pooling, batch norm.

#[test]
fn sqrt_and_rsqrt() {
    check(case("sqrt", vec![input_in("a", &[2, 3], Domain::Positive)], unary("Sqrt"), &[2, 3]));
    check(case("rsqrt", vec![input_in("a", &[2, 3], Domain::Positive)], unary("Rsqrt"), &[2, 3]));
}

#[test]
fn abs_and_erf() {
    check(case("abs", vec![input_in("a", &[2, 3], Domain::AwayFromZero)], unary("Abs"), &[2, 3]));
    check(case("erf", vec![input("a", &[2, 3])], unary("Erf"), &[2, 3]));
}

#[test]
fn activations() {
    for op in ["Relu6", "Elu", "Selu", "Softplus"] {
        let name: &'static str = Box::leak(op.to_lowercase().into_boxed_str());
        check(case(name, vec![input_in("a", &[2, 3], Domain::AwayFromZero)], unary(op), &[2, 3]));
    }
    let forward = "%out = LeakyRelu(%a) {T = f64, alpha = 0.3}";
    check(case("leaky_relu", vec![input_in("a", &[2, 3], Domain::AwayFromZero)], forward, &[2, 3]));
}

#[test]
fn log_softmax_and_squared_difference() {
    check(case("log_softmax", vec![input("a", &[2, 4])], unary("LogSoftmax"), &[2, 4]));
    let forward = "%out = SquaredDifference(%a, %b) {T = f64}";
    check(case("squared_difference", vec![input("a", &[2, 3]), input("b", &[3])], forward, &[2, 3]));
}

#[test]
fn softmax_cross_entropies() {
    let forward = i32_const("labels", &[3], &[2, 0, 3])
        + "%xent = SparseSoftmaxCrossEntropyWithLogits(%a, %labels) {T = f64, Tlabels = i32}\n"
        + "%out = Identity(%xent) {T = f64}";
    check(case("sparse_xent", vec![input("a", &[3, 4])], forward, &[3]));
    // The labels are a distribution per row (the kernel's backprop assumes rows summing to 1).
    let forward = "%p = Softmax(%b) {T = f64}\n\
                   %xent = SoftmaxCrossEntropyWithLogits(%a, %p) {T = f64}\n%out = Identity(%xent) {T = f64}";
    check(case("xent", vec![input("a", &[3, 4]), input("b", &[3, 4])], forward, &[3]));
}

#[test]
fn expand_squeeze_concat() {
    let forward = i32_const("dim", &[], &[1]) + "%out = ExpandDims(%a, %dim) {T = f64, Tdim = i32}";
    check(case("expand_dims", vec![input("a", &[2, 3])], forward, &[2, 1, 3]));
    let forward = "%out = Squeeze(%a) {T = f64, squeeze_dims = [1]}";
    check(case("squeeze", vec![input("a", &[2, 1, 3])], forward, &[2, 3]));
    let forward = i32_const("axis", &[], &[-1]) + "%out = ConcatV2(%a, %b, %axis) {N = 2, T = f64, Tidx = i32}";
    check(case("concat", vec![input("a", &[2, 3]), input("b", &[2, 2])], forward, &[2, 5]));
}

#[test]
fn slices() {
    let forward = i32_const("begin", &[2], &[1, 0])
        + &i32_const("size", &[2], &[1, 2])
        + "%out = Slice(%a, %begin, %size) {T = f64, Index = i32}";
    check(case("slice", vec![input("a", &[3, 3])], forward, &[1, 2]));
    // a[::-1, 1:, 2] with the last axis shrunk.
    let forward = i32_const("begin", &[3], &[0, 1, 2])
        + &i32_const("end", &[3], &[0, 0, 3])
        + &i32_const("strides", &[3], &[-1, 1, 1])
        + "%out = StridedSlice(%a, %begin, %end, %strides) {T = f64, Index = i32, begin_mask = 1, end_mask = 3, \
           ellipsis_mask = 0, new_axis_mask = 0, shrink_axis_mask = 4}";
    check(case("strided_slice", vec![input("a", &[2, 3, 4])], forward, &[2, 2]));
}

#[test]
fn cumsum_and_gather() {
    let forward =
        i32_const("axis", &[], &[1]) + "%out = Cumsum(%a, %axis) {T = f64, exclusive = true, reverse = false}";
    check(case("cumsum", vec![input("a", &[2, 4])], forward, &[2, 4]));
    let forward = i32_const("ids", &[2, 2], &[3, 0, 3, 1])
        + &i32_const("axis", &[], &[0])
        + "%out = GatherV2(%a, %ids, %axis) {Tparams = f64, Tindices = i32, Taxis = i32, batch_dims = 0}";
    check(case("gather", vec![input("a", &[4, 3])], forward, &[2, 2, 3]));
}

#[test]
fn convolutions() {
    let forward =
        "%out = Conv2D(%a, %b) {T = f64, strides = [1, 2, 1, 1], padding = \"SAME\", data_format = \"NHWC\", \
                   dilations = [1, 1, 1, 1]}";
    check(case("conv2d", vec![input("a", &[1, 4, 3, 2]), input("b", &[2, 2, 2, 3])], forward, &[1, 2, 3, 3]));
    let forward = "%out = DepthwiseConv2dNative(%a, %b) {T = f64, strides = [1, 1, 1, 1], padding = \"VALID\", \
                   data_format = \"NHWC\", dilations = [1, 1, 1, 1]}";
    check(case("depthwise", vec![input("a", &[1, 3, 3, 2]), input("b", &[2, 2, 2, 2])], forward, &[1, 2, 2, 4]));
}

#[test]
fn pools() {
    let forward = "%out = AvgPool(%a) {T = f64, ksize = [1, 2, 2, 1], strides = [1, 1, 1, 1], padding = \"SAME\", \
                   data_format = \"NHWC\"}";
    check(case("avg_pool", vec![input("a", &[1, 3, 3, 2])], forward, &[1, 3, 3, 2]));
    let forward = "%out = MaxPool(%a) {T = f64, ksize = [1, 2, 2, 1], strides = [1, 2, 2, 1], padding = \"VALID\", \
                   data_format = \"NHWC\"}";
    check(case("max_pool", vec![input("a", &[1, 4, 4, 1])], forward, &[1, 2, 2, 1]));
}

#[test]
fn volumetric_convolution_and_pools() {
    let forward = "%out = Conv3D(%a, %b) {T = f64, strides = [1, 2, 1, 1, 1], padding = \"SAME\", \
                   data_format = \"NDHWC\", dilations = [1, 1, 1, 1, 1]}";
    check(case("conv3d", vec![input("a", &[1, 3, 3, 2, 2]), input("b", &[2, 2, 1, 2, 2])], forward, &[1, 2, 3, 2, 2]));
    let forward = "%out = AvgPool3D(%a) {T = f64, ksize = [1, 2, 2, 2, 1], strides = [1, 1, 1, 1, 1], \
                   padding = \"SAME\", data_format = \"NDHWC\"}";
    check(case("avg_pool3d", vec![input("a", &[1, 2, 3, 2, 1])], forward, &[1, 2, 3, 2, 1]));
    let forward = "%out = MaxPool3D(%a) {T = f64, ksize = [1, 2, 2, 2, 1], strides = [1, 2, 2, 2, 1], \
                   padding = \"VALID\", data_format = \"NDHWC\"}";
    check(case("max_pool3d", vec![input("a", &[1, 4, 2, 4, 1])], forward, &[1, 2, 1, 2, 1]));
}

/// The volumetric backprops as functions of their tensor operands (second-order gradients).
#[test]
fn volumetric_backprops() {
    let geometry =
        "strides = [1, 2, 1, 1, 1], padding = \"SAME\", data_format = \"NDHWC\", dilations = [1, 1, 1, 1, 1]";
    let forward = i32_const("sizes", &[5], &[1, 3, 3, 2, 2])
        + &format!("%out = Conv3DBackpropInputV2(%sizes, %b, %dy) {{T = f64, Tshape = i32, {geometry}}}");
    let inputs = vec![input("b", &[2, 2, 1, 2, 2]), input("dy", &[1, 2, 3, 2, 2])];
    check(case("conv3d_backprop_input", inputs, forward, &[1, 3, 3, 2, 2]));
    let forward = i32_const("sizes", &[5], &[2, 2, 1, 2, 2])
        + &format!("%out = Conv3DBackpropFilterV2(%a, %sizes, %dy) {{T = f64, {geometry}}}");
    let inputs = vec![input("a", &[1, 3, 3, 2, 2]), input("dy", &[1, 2, 3, 2, 2])];
    check(case("conv3d_backprop_filter", inputs, forward, &[2, 2, 1, 2, 2]));
    let forward = i32_const("sizes", &[5], &[1, 2, 3, 2, 1])
        + "%out = AvgPool3DGrad(%sizes, %dy) {T = f64, ksize = [1, 2, 2, 2, 1], strides = [1, 1, 1, 1, 1], \
           padding = \"SAME\", data_format = \"NDHWC\"}";
    check(case("avg_pool3d_grad", vec![input("dy", &[1, 2, 3, 2, 1])], forward, &[1, 2, 3, 2, 1]));
}

#[test]
fn fused_batch_norm_training() {
    let forward = "%zero = Const() {dtype = f64, value = tensor(f64, [0]) []}\n\
                   %bn = FusedBatchNormV3(%a, %scale, %offset, %zero, %zero) {T = f64, U = f64, epsilon = 0.001, \
                   is_training = true, data_format = \"NHWC\"}\n\
                   %out = Identity(%bn) {T = f64}";
    let inputs = vec![input("a", &[2, 2, 1, 3]), input_in("scale", &[3], Domain::Positive), input("offset", &[3])];
    check(case("fused_batch_norm", inputs, forward, &[2, 2, 1, 3]));
}

#[test]
fn max_min_pow_pad_and_batch_matmul_v3() {
    let axes = i32_const("axes", &[1], &[1]);
    let forward = axes.clone() + "%out = Max(%a, %axes) {T = f64, Tidx = i32, keep_dims = false}";
    check(case("max", vec![input("a", &[3, 4])], forward, &[3]));
    let forward = axes + "%out = Min(%a, %axes) {T = f64, Tidx = i32, keep_dims = true}";
    check(case("min", vec![input("a", &[3, 4])], forward, &[3, 1]));
    let forward = "%out = Pow(%a, %b) {T = f64}";
    check(case("pow", vec![input_in("a", &[2, 3], Domain::Positive), input("b", &[3])], forward, &[2, 3]));
    let forward =
        i32_const("paddings", &[2, 2], &[1, 0, 2, 1]) + "%out = Pad(%a, %paddings) {T = f64, Tpaddings = i32}";
    check(case("pad", vec![input("a", &[2, 3])], forward, &[3, 6]));
    let forward = "%out = BatchMatMulV3(%a, %b) {Ta = f64, Tb = f64, Tout = f64, adj_x = false, adj_y = true}";
    check(case("batch_matmul_v3", vec![input("a", &[2, 2, 3]), input("b", &[4, 3])], forward, &[2, 2, 4]));
}

#[test]
fn prod_over_one_axis_several_axes_and_all_with_kept_dims() {
    let forward = i32_const("axis", &[], &[1]) + "%out = Prod(%a, %axis) {T = f64, Tidx = i32, keep_dims = false}";
    check(case("prod_axis", vec![input("a", &[3, 4])], forward, &[3]));
    let forward = i32_const("axes", &[2], &[0, -1]) + "%out = Prod(%a, %axes) {T = f64, Tidx = i32, keep_dims = true}";
    check(case("prod_axes", vec![input("a", &[2, 3, 2])], forward, &[1, 3, 1]));
    let forward = i32_const("axes", &[2], &[1, 0]) + "%out = Prod(%a, %axes) {T = f64, Tidx = i32, keep_dims = false}";
    check(case("prod_all", vec![input("a", &[2, 3])], forward, &[]));
}

#[test]
fn einsum_contractions_outer_products_transposes_and_reductions() {
    let einsum = |eq: &str, n: usize| {
        format!("%out = Einsum({}) {{equation = \"{eq}\", N = {n}, T = f64}}", if n == 2 { "%a, %b" } else { "%a" })
    };
    check(case(
        "einsum_bmm",
        vec![input("a", &[2, 2, 3]), input("b", &[2, 3, 4])],
        einsum("bij,bjk->bik", 2),
        &[2, 2, 4],
    ));
    check(case("einsum_outer", vec![input("a", &[3]), input("b", &[2, 2])], einsum("i,jk->ijk", 2), &[3, 2, 2]));
    // `j` is summed in `a` alone and `m` in `b` alone: their gradients broadcast back.
    check(case("einsum_summed", vec![input("a", &[2, 3]), input("b", &[4, 2])], einsum("ij,km->ik", 2), &[2, 4]));
    check(case("einsum_transpose", vec![input("a", &[2, 3])], einsum("ij->ji", 1), &[3, 2]));
    check(case("einsum_reduce", vec![input("a", &[2, 3, 4])], einsum("bij->j", 1), &[4]));
}
