//! The crate's modules import one way: no module imports another that
//! imports it back, directly or through others (a type both sides need
//! lives in the lower module, as `Exchange` does in `exchange`). Checked on
//! the source text: every `crate::X` outside comments is an edge to X.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module (a file of `src/`) and the modules it names as `crate::X`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        // (Tests may reach anywhere: only the module's own code counts.)
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let mut named = BTreeSet::new();
        for line in code.lines() {
            let line = line.split("//").next().unwrap_or("");
            for (i, _) in line.match_indices("crate::") {
                let m: String = line[i + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if m != name && !m.is_empty() {
                    named.insert(m);
                }
            }
        }
        out.insert(name, named);
    }
    out
}

/// A cycle through `from`, as the modules on it, if there is one.
fn cycle(g: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut path = vec![from.to_string()];
    fn walk(g: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, seen: &mut BTreeSet<String>) -> bool {
        let at = path.last().unwrap().clone();
        for next in g.get(&at).into_iter().flatten() {
            if *next == path[0] {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(g, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    walk(g, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let g = imports();
    assert!(g.contains_key("freezer") && g["freezer"].contains("bracket"), "the check reads the imports: {g:?}");
    let cycles: Vec<String> = g.keys().filter_map(|m| cycle(&g, m)).map(|c| c.join(" → ")).collect();
    assert!(cycles.is_empty(), "import circles: {cycles:#?}");
}

#[test]
fn the_check_finds_a_circle_when_there_is_one() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    g.insert("d".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycle(&g, "a"), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    assert_eq!(cycle(&g, "d"), None);
}
