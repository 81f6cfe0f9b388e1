//! Unit tests of the batch container.

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn batcher(config: BatchConfig) -> Batcher<u32> {
    Batcher::new(config, "prod")
}

fn entry(b: &mut Batcher<u32>) -> Entry<u32> {
    b.poll_ready().expect("an entry").expect("sealed")
}

fn members(e: &Entry<u32>) -> Vec<batch::Member> {
    let raw = match e.metadata.compression {
        Some(_) => {
            let codec = Compression::from_proto(e.metadata.compression.unwrap()).unwrap();
            codec
                .decompress(
                    e.payload.clone(),
                    e.metadata.uncompressed_size.unwrap(),
                    1 << 20,
                )
                .unwrap()
        }
        None => e.payload.clone(),
    };
    batch::members(raw, e.num_messages())
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn full_by_count_seals_with_batch_metadata() {
    let t0 = crate::clock::now();
    let mut b = batcher(BatchConfig {
        max_messages: 3,
        ..BatchConfig::default()
    });
    for (i, seq) in [10u64, 11, 12].into_iter().enumerate() {
        assert!(b.poll_ready().is_none());
        let msg = ProducerMessage::new(format!("m{i}"))
            .key(format!("k{i}"))
            .event_time(5);
        b.push(t0, 1_000 + seq, seq, &msg, i as u32);
    }
    let e = entry(&mut b);
    assert!(e.batched);
    assert_eq!((e.first, e.last, e.num_messages()), (10, 12, 3));
    assert_eq!(e.metadata.sequence_id, 10);
    assert_eq!(e.metadata.highest_sequence_id, Some(12));
    assert_eq!(e.metadata.num_messages_in_batch, Some(3));
    assert_eq!(e.metadata.publish_time, 1_010);
    assert_eq!(e.metadata.producer_name, "prod");
    assert_eq!(e.tokens, [0, 1, 2]);
    let all = members(&e);
    assert_eq!(all[1].payload, Bytes::from_static(b"m1"));
    assert_eq!(all[2].metadata.partition_key.as_deref(), Some("k2"));
    assert_eq!(all[2].metadata.sequence_id, Some(12));
    assert_eq!(all[0].metadata.event_time, Some(5));
    assert!(b.next_deadline().is_none());
}

#[test]
fn a_message_that_does_not_fit_opens_the_next_batch() {
    let t0 = crate::clock::now();
    let mut b = batcher(BatchConfig {
        max_bytes: 10,
        ..BatchConfig::default()
    });
    b.push(t0, 0, 1, &ProducerMessage::new(vec![1u8; 6]), 1);
    b.push(t0, 0, 2, &ProducerMessage::new(vec![2u8; 6]), 2);
    let first = entry(&mut b);
    assert_eq!(first.tokens, [1]);
    assert!(b.poll_ready().is_none());
    // One larger than the limit still goes, alone, at once.
    b.push(t0, 0, 3, &ProducerMessage::new(vec![3u8; 50]), 3);
    assert_eq!(entry(&mut b).tokens, [2]);
    let big = entry(&mut b);
    assert_eq!((big.tokens.as_slice(), big.batched), (&[3][..], true));
}

#[test]
fn linger_deadline_follows_the_first_message() {
    let t0 = crate::clock::now();
    let mut b = batcher(BatchConfig::default());
    assert_eq!(b.next_deadline(), None);
    b.push(t0, 0, 0, &ProducerMessage::new("a"), 0);
    b.push(t0 + ms(4), 0, 1, &ProducerMessage::new("b"), 1);
    assert_eq!(b.next_deadline(), Some(t0 + ms(10)));
    b.on_tick(t0 + ms(9));
    assert!(b.poll_ready().is_none());
    b.on_tick(t0 + ms(10));
    assert_eq!(entry(&mut b).tokens, [0, 1]);
    assert_eq!(b.next_deadline(), None);
}

#[test]
fn delayed_messages_go_alone_after_the_open_batch() {
    let t0 = crate::clock::now();
    let mut b = batcher(BatchConfig::default());
    b.push(t0, 100, 0, &ProducerMessage::new("a"), 0);
    let delayed = ProducerMessage::new("later").deliver_after(ms(5_000));
    b.push(t0, 100, 1, &delayed, 1);
    b.push(t0, 100, 2, &ProducerMessage::new("c"), 2);
    b.flush();
    let order: Vec<_> = std::iter::from_fn(|| b.poll_ready())
        .map(|s| s.unwrap())
        .map(|e| (e.tokens.clone(), e.batched, e.metadata.deliver_at_time))
        .collect();
    assert_eq!(
        order,
        [
            (vec![0], true, None),
            (vec![1], false, Some(5_100)),
            (vec![2], true, None)
        ]
    );
}

#[test]
fn batching_off_sends_each_message_as_its_own_entry() {
    let t0 = crate::clock::now();
    let mut b = batcher(BatchConfig {
        enabled: false,
        ..BatchConfig::default()
    });
    b.push(t0, 7, 5, &ProducerMessage::new("x").key("k"), 9);
    let e = entry(&mut b);
    assert!(!e.batched);
    assert_eq!((e.first, e.last), (5, 5));
    assert_eq!(e.metadata.num_messages_in_batch, None);
    assert_eq!(e.metadata.partition_key.as_deref(), Some("k"));
    assert_eq!(e.payload, Bytes::from_static(b"x"));
    assert_eq!(b.next_deadline(), None);
}

#[test]
fn compression_applies_to_batches_and_single_messages() {
    let t0 = crate::clock::now();
    let text = "compressible ".repeat(50);
    for enabled in [true, false] {
        for codec in [
            Compression::Lz4,
            Compression::Zlib,
            Compression::Zstd,
            Compression::Snappy,
        ] {
            let mut b = batcher(BatchConfig {
                enabled,
                compression: codec,
                ..BatchConfig::default()
            });
            b.push(t0, 0, 0, &ProducerMessage::new(text.clone()), 0);
            b.flush();
            let e = entry(&mut b);
            assert_eq!(e.metadata.compression, Some(codec.to_proto() as i32));
            assert!(e.payload.len() < e.uncompressed, "{codec:?}");
            assert_eq!(e.metadata.uncompressed_size, Some(e.uncompressed as u32));
            let raw = codec
                .decompress(e.payload.clone(), e.uncompressed as u32, 1 << 20)
                .unwrap();
            if enabled {
                assert_eq!(members(&e)[0].payload, Bytes::from(text.clone()));
            } else {
                assert_eq!(raw, Bytes::from(text.clone()));
            }
        }
    }
}

#[test]
fn drain_returns_every_held_token() {
    let t0 = crate::clock::now();
    let mut b = batcher(BatchConfig {
        max_messages: 2,
        ..BatchConfig::default()
    });
    for i in 0..5 {
        b.push(t0, 0, i, &ProducerMessage::new("m"), i as u32);
    }
    assert_eq!(b.len(), 5);
    let mut all = b.drain();
    all.sort_unstable();
    assert_eq!(all, [0, 1, 2, 3, 4]);
    assert_eq!(b.len(), 0);
    assert!(b.poll_ready().is_none() && b.next_deadline().is_none());
}

#[test]
fn a_linger_of_duration_max_never_overflows() {
    let t0 = crate::clock::now();
    let mut b = batcher(BatchConfig {
        max_delay: Duration::MAX,
        ..BatchConfig::default()
    });
    b.push(t0, 0, 0, &ProducerMessage::new("a"), 0);
    assert!(b.next_deadline().is_some_and(|d| d > t0 + ms(3_600_000)));
    b.on_tick(t0 + ms(3_600_000));
    assert_eq!(b.len(), 1, "still open");
}
