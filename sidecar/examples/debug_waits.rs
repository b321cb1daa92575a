use sidecar::analyze::*;
use sidecar::model::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&args[1]).unwrap();
    let width: u64 = args[2].parse().unwrap();
    let mut ing = sidecar::ingest::Ingest::new("f", width);
    let mut fb = ringlog::FrameBuffer::new();
    fb.feed(&bytes);
    while let Ok(Some(f)) = fb.next_frame() { let b = ing.out.len(); ing.frame(f, 0); ing.finish_batch(b); }
    ing.eof();
    let mut by: std::collections::BTreeMap<u64, Vec<Fragment>> = Default::default();
    for f in ing.out.drain(..) { by.entry(f.window).or_default().push(f); }
    for (w, frags) in by {
        let copy = frags.clone();
        let mut d = WindowDetail::default();
        let host = frags[0].stream.unwrap().host;
        let rep = analyze_detail(host, w, width, frags, Some(&mut d));
        for v in &rep.properties.wait_termination.at {
            let wk = v.worker.unwrap();
            let li = d.streams.iter().position(|s| s.worker == wk).unwrap();
            for a in d.activities.iter().filter(|a| a.stream as usize == li && a.end == v.at_ns) { println!("window {w} wait {:?} dur {}", a, a.end - a.start); 
              let f = &copy[copy.iter().position(|f| f.stream.unwrap().worker == wk).unwrap()];
              let k = f.items.iter().position(|i| matches!(i, Item::Gap{..}) && i.start() <= a.start && i.end() >= a.end).unwrap();
              for it in &f.items[k..(k+8).min(f.items.len())] { println!("   {:?}", it); }
              let (gs, ge) = (f.items[k].start(), f.items[k].end());
              for (j, g) in copy.iter().enumerate() { for it in g.items.iter() { match it { Item::Send{to, ts, ..} | Item::Recv{from: to, ts, ..} if (*to == wk || j == li) && *ts + 100_000 >= gs && *ts <= ge + 100_000 => println!("   stream {j}: {:?}", it), Item::PSend{ts, ..} | Item::PRecv{ts, ..} if *ts + 20_000 >= gs && *ts <= ge + 20_000 => println!("   stream {j}: {:?}", it), _ => {} } } }
            }
        }
    }
}
