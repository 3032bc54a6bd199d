//! Topology creation and teardown in real network namespaces (needs root, as CI runs it).

use fastpath_lab::topo::{self, ns_exec, TopoConfig, Topology};

#[test]
fn topology_links_up_and_teardown_leaves_nothing() {
    let mut t = Topology::create(&TopoConfig::default()).unwrap();
    let names = t.namespaces();
    assert_eq!(names.len(), 3);
    for (ns, ifn) in t.links() {
        let out = ns_exec(&ns, &["ip", "-o", "link", "show", ifn]).unwrap();
        assert!(out.contains("state UP") || out.contains(",UP"), "{ns}/{ifn}: {out}");
    }
    let addr = ns_exec(&t.gen_ns, &["ip", "-o", "-4", "addr", "show", "gen0"]).unwrap();
    assert!(addr.contains("198.18.0.1/24"), "{addr}");
    let v6 = ns_exec(&t.sink_ns, &["sysctl", "-n", "net.ipv6.conf.all.disable_ipv6"]).unwrap();
    assert_eq!(v6.trim(), "1");
    // A process started inside the DUT namespace is killed by teardown.
    let child = std::process::Command::new("ip").args(["netns", "exec", &t.dut_ns, "sleep", "30"]).spawn().unwrap();
    let mut child = child;
    for _ in 0..100 {
        if !topo::ns_pids(&t.dut_ns).is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(!topo::ns_pids(&t.dut_ns).is_empty());
    assert!(!t.leftovers().is_empty());
    t.teardown().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "sleep was killed");
    assert_eq!(t.leftovers(), Vec::<String>::new());
    let all = topo::namespaces(topo::PREFIX);
    for n in names {
        assert!(!all.contains(&n), "{n} left behind");
    }
}

#[test]
fn panic_mid_run_still_tears_down() {
    let names = std::sync::Mutex::new(Vec::new());
    let r = std::panic::catch_unwind(|| {
        let t = Topology::create(&TopoConfig::default()).unwrap();
        names.lock().unwrap().extend(t.namespaces());
        panic!("injected failure inside the run");
    });
    assert!(r.is_err());
    let names = names.into_inner().unwrap();
    assert_eq!(names.len(), 3);
    let all = topo::namespaces(topo::PREFIX);
    for n in &names {
        assert!(!all.contains(n), "{n} left behind after a panic");
    }
}

#[test]
fn in_netns_runs_inside_the_namespace() {
    let t = Topology::create(&TopoConfig::default()).unwrap();
    // Inside the sink namespace sink0 exists and gen0 does not.
    let out = topo::in_netns(&t.sink_ns, || std::fs::read_to_string("/proc/thread-self/net/dev")).unwrap().unwrap();
    assert!(out.contains("sink0") && !out.contains("gen0"), "{out}");
}

#[test]
fn ctrl_c_sets_the_flag_instead_of_killing_the_process() {
    topo::install_ctrlc().unwrap();
    assert!(!topo::interrupted());
    signal_hook::low_level::raise(signal_hook::consts::SIGINT).unwrap();
    assert!(topo::interrupted(), "SIGINT must only set the flag");
    topo::set_interrupted(false);
}
