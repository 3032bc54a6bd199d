//! The namespace helpers clean up after a panicking test too. Root only (CI runs as root).

mod netns_common;

use fastpath_io::netns::{ip, Netns, VethPair};
use netns_common::skip_unless_root;

#[test]
fn a_panicking_test_leaves_no_namespace_or_link_behind() {
    if skip_unless_root() {
        return;
    }
    let names = std::sync::Mutex::new(Vec::new());
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            let a = Netns::new("fp-np").unwrap();
            let b = Netns::new("fp-np").unwrap();
            names.lock().unwrap().extend([a.name().to_string(), b.name().to_string()]);
            let _v = VethPair::new(&a, "np0", &b, "np1").unwrap();
            panic!("test failure inside a topology");
        })
        .join()
    });
    assert!(r.is_err(), "the thread panicked");
    let names = names.into_inner().unwrap();
    assert_eq!(names.len(), 2);
    let list = ip(&["netns", "list"]).unwrap();
    for n in &names {
        assert!(!list.contains(n.as_str()), "{n} left behind: {list}");
    }
}

#[test]
fn names_are_unique_per_process_and_call() {
    if skip_unless_root() {
        return;
    }
    let a = Netns::new("fp-nu").unwrap();
    let b = Netns::new("fp-nu").unwrap();
    assert_ne!(a.name(), b.name());
    assert!(a.name().contains(&std::process::id().to_string()));
}
