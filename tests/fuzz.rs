//! placeholder
#[test]
fn stub() {}
