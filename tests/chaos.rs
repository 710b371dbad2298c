#[test]
fn chaos_stub() {}
