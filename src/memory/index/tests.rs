//! Unit tests of the vector index: parameters, normalization, watermark and distance.

use super::*;

#[test]
fn parameters_that_would_exit_the_process_are_refused_first() {
    let params = IndexParams {
        max_connections: 300,
        ..IndexParams::default()
    };
    assert!(matches!(
        VectorIndex::new(8, params),
        Err(IndexError::InvalidParams(_))
    ));
    assert!(VectorIndex::new(0, IndexParams::default()).is_err());
}

#[test]
fn normalize_refuses_bad_vectors_and_scales_good_ones() {
    assert_eq!(
        normalize(&[1.0, 2.0], 3),
        Err(IndexError::DimensionMismatch {
            expected: 3,
            got: 2
        })
    );
    assert!(matches!(
        normalize(&[1.0, f32::NAN, 0.0], 3),
        Err(IndexError::NonFinite { position: 1, .. })
    ));
    assert_eq!(normalize(&[0.0; 3], 3), Err(IndexError::ZeroVector));
    let huge = normalize(&[3.0e37, 4.0e37, 0.0], 3).expect("finite large values are fine");
    assert!((huge[0] - 0.6).abs() < 1e-6 && (huge[1] - 0.8).abs() < 1e-6);
}

#[test]
fn the_watermark_ignores_order_and_sees_owners() {
    let a = Watermark::from_chunks(4, "m", [(1, "x"), (2, "y")]);
    let b = Watermark::from_chunks(4, "m", [(2, "y"), (1, "x")]);
    let c = Watermark::from_chunks(4, "m", [(1, "y"), (2, "x")]);
    assert_eq!(a, b);
    assert_ne!(a.id_set_checksum, c.id_set_checksum);
    assert_eq!(a.max_chunk_id, Some(2));
}

#[test]
fn unit_cosine_distance_is_one_minus_the_dot_product() {
    let distance = UnitCosineDistance;
    let x = [1.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    let y = [0.0f32, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    let minus_x = x.map(|value| -value);
    assert_eq!(distance.eval(&x, &x), 0.0);
    assert_eq!(distance.eval(&x, &y), 1.0);
    assert_eq!(distance.eval(&x, &minus_x), 2.0);
    // The tail after the last group of eight counts too.
    let mut tail = [0.0f32; 9];
    tail[8] = 1.0;
    assert_eq!(distance.eval(&tail, &tail), 0.0);
    // Rounding above 1 is clamped, never negative.
    let unit = normalize(&[0.3, 0.7, 0.1, 0.9, 0.2, 0.4, 0.8, 0.6, 0.5], 9).unwrap();
    assert!((0.0..1e-6).contains(&distance.eval(&unit, &unit)));
    assert_eq!(distance_name(), "UnitCosineDistance");
}

#[test]
fn the_index_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<VectorIndex>();
}
