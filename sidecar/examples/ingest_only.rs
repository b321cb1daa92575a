//! Times the ingest stages alone (decode, clock, activities, windows) on a
//! file: `ingest_only FILE [decode]`.
fn main() {
    let path = std::env::args().nth(1).expect("FILE");
    let decode_only = std::env::args().nth(2).is_some();
    let f = std::fs::File::open(&path).unwrap();
    let t = std::time::Instant::now();
    let mut ing = sidecar::ingest::stream::Ingest::new(path.clone(), 1_000_000_000);
    let mut recs = 0u64;
    let mut frags = 0usize;
    for fr in ringlog::Decoder::new(f) {
        let fr = fr.unwrap();
        if decode_only {
            if let ringlog::Body::Records(r) = &fr.body {
                recs += r.len() as u64;
            }
            continue;
        }
        let before = ing.out.len();
        ing.frame(fr, 0);
        ing.finish_batch(before);
        frags += ing.out.len();
        // Item vectors go back to the pool, as the analysis gives them back.
        for f in ing.out.drain(..) {
            sidecar::analysis::model::give_items(f.items);
            f.msgs.recycle();
        }
    }
    ing.eof();
    let s = t.elapsed().as_secs_f64();
    let n = if decode_only { recs } else { ing.records };
    eprintln!("{} records in {:.2} s: {:.2} M/s ({} fragments)", n, s, n as f64 / s / 1e6, frags);
}
