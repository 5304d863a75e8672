fn main() {
    let path = std::env::args().nth(1).expect("path");
    let bytes = std::fs::read(&path).unwrap();
    match tpu_rewrite::ir::parse_module(&bytes) {
        Ok((m, errs)) => {
            for e in &errs {
                eprintln!("{e:?}");
            }
            let text = tpu_rewrite::emit::print_module(&m);
            print!("{text}");
            let (m2, errs2) = tpu_rewrite::ir::parse_module(text.as_bytes()).unwrap();
            assert!(errs2.len() == errs.len());
            assert!(m == m2, "{:?}", tpu_rewrite::ir::eq::first_difference(&m.graphs[0], &m2.graphs[0]));
            assert_eq!(tpu_rewrite::emit::print_module(&m2), text);
        }
        Err(e) => eprintln!("{e:?}"),
    }
}
