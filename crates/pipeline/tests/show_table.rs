//! Reading tables back (`Pipeline::entry_lines`, behind `fastpath ctl show table NAME`): every
//! engine lists its entries as entry commands, and those commands load into a fresh pipeline as
//! the same table — same lines, and a shown key deletes its entry.

use fastpath_pipeline::Pipeline;
use proptest::prelude::*;

fn reference(name: &str) -> Pipeline {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let text = std::fs::read_to_string(format!("{root}pipelines/{name}.toml")).unwrap().replace("size = 5000000\n", "size = 1024\n");
    fastpath_pipeline::compile(&format!("{name}.toml"), &text).unwrap_or_else(|e| panic!("{e}")).instantiate()
}

/// Lists `tables` of `p`, loads the lines into `fresh`, and checks that it lists the same.
fn round_trip(p: &Pipeline, mut fresh: Pipeline, tables: &[&str]) -> Vec<String> {
    let mut all = Vec::new();
    for t in tables {
        let lines = p.entry_lines(t).unwrap();
        assert_eq!(lines.len(), p.table(t).unwrap().len(), "{t}: one line per entry");
        fresh.load_entries("shown", &lines.join("\n")).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(fresh.entry_lines(t).unwrap(), lines, "{t}: the lines load back as the same table");
        all.extend(lines);
    }
    all
}

#[test]
fn router_routes_list_as_prefixes_with_their_next_hops() {
    let mut p = reference("router");
    p.load_entries(
        "e",
        "table fib4 add 198.18.0.0/15 => nexthop(1, 02:00:00:00:01:01, 02:00:00:00:00:01)
table fib4 add 0.0.0.0/0 => drop
table fib4 add 198.18.7.9 => nexthop(2, 02:00:00:00:01:02, 02:00:00:00:00:02)
table fib6 add 2001:2::/48 => nexthop(1, 02:00:00:00:01:01, 02:00:00:00:00:01)",
    )
    .unwrap();
    let lines = round_trip(&p, reference("router"), &["fib4", "fib6"]);
    assert!(lines.contains(&"table fib4 add 198.18.0.0/15 => nexthop(1, 02:00:00:00:01:01, 02:00:00:00:00:01)".to_string()), "{lines:#?}");
    assert!(lines.contains(&"table fib4 add 198.18.7.9/32 => nexthop(2, 02:00:00:00:01:02, 02:00:00:00:00:02)".to_string()), "{lines:#?}");
    assert!(lines.contains(&"table fib6 add 2001:2::/48 => nexthop(1, 02:00:00:00:01:01, 02:00:00:00:00:01)".to_string()), "{lines:#?}");
    assert_eq!(p.entry_lines("fib4").unwrap()[0], "table fib4 add 0.0.0.0/0 => drop", "sorted by key");
    assert!(p.entry_lines("nope").is_none());
}

#[test]
fn port_indexed_tables_list_their_ports() {
    let mut p = reference("l2fwd");
    p.load_entries("e", "table port_pair add 1 => forward(0)\ntable port_pair add 0 => forward(1)\n").unwrap();
    let lines = round_trip(&p, reference("l2fwd"), &["port_pair"]);
    assert_eq!(lines, ["table port_pair add 0 => forward(1)", "table port_pair add 1 => forward(0)"]);
}

#[test]
fn overlay_exact_direct_and_classifier_tables_list_and_reload() {
    let mut p = reference("sdn-overlay");
    p.load_entries(
        "e",
        "table vni_map add 100 => set_vnet(1)
table vni_map add 200 => set_vnet(2)
table local_mac add 02:00:c6:13:64:01 => local_mac(1)
table ca_pa add 1 198.19.100.2 => to_tunnel(2)
table ca_pa add 2 198.19.100.2 => to_tunnel(3)
table tunnels add 1 => encap(02:00:00:00:0e:01, 02:00:00:00:0e:00, 198.18.1.254, 198.18.1.1, 100, 0)
table acl_in add 198.19.100.0/24 * 80..90 6 priority 10 => allow
table acl_in add 198.19.0.0/0xffff00ff 10.0.0.1 * 17/0xff priority 20 => deny
table acl_in add * 198.19.100.1..198.19.100.9 443 * priority 5 => allow
table acl_in add * * * * => deny",
    )
    .unwrap();
    let tables = ["vni_map", "local_mac", "ca_pa", "tunnels", "acl_in"];
    let lines = round_trip(&p, reference("sdn-overlay"), &tables);
    for want in [
        "table vni_map add 200 => set_vnet(2)",
        "table local_mac add 02:00:c6:13:64:01 => local_mac(1)",
        "table ca_pa add 2 198.19.100.2 => to_tunnel(3)",
        "table tunnels add 1 => encap(02:00:00:00:0e:01, 02:00:00:00:0e:00, 198.18.1.254, 198.18.1.1, 100, 0)",
        "table acl_in add 198.19.100.0/24 * 80..90 6 priority 10 => allow",
        "table acl_in add 198.19.0.0/0xffff00ff 10.0.0.1 * 17/0xff priority 20 => deny",
        "table acl_in add * 198.19.100.1..198.19.100.9 443 * priority 5 => allow",
    ] {
        assert!(lines.iter().any(|l| l == want), "missing {want}: {lines:#?}");
    }
    // A shown key deletes its entry.
    for l in p.entry_lines("acl_in").unwrap() {
        let key = l.split(" priority ").next().unwrap().replacen(" add ", " del ", 1);
        p.apply_command(&key).unwrap_or_else(|e| panic!("{key}: {e}"));
    }
    assert_eq!(p.table("acl_in").unwrap().len(), 0);
}

/// One classifier field written in every form the entry syntax has.
fn ipv4_match() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_string()),
        any::<u32>().prop_map(|a| std::net::Ipv4Addr::from(a).to_string()),
        (any::<u32>(), 0u8..=32).prop_map(|(a, l)| {
            let m = if l == 0 { 0 } else { u32::MAX << (32 - l) };
            format!("{}/{l}", std::net::Ipv4Addr::from(a & m))
        }),
        (any::<u32>(), any::<u32>()).prop_map(|(a, m)| format!("{}/{m:#x}", std::net::Ipv4Addr::from(a & m))),
        (any::<u32>(), any::<u32>()).prop_map(|(a, b)| format!(
            "{}..{}",
            std::net::Ipv4Addr::from(a.min(b)),
            std::net::Ipv4Addr::from(a.max(b))
        )),
    ]
}

fn port_match() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_string()),
        any::<u16>().prop_map(|p| p.to_string()),
        (any::<u16>(), any::<u16>()).prop_map(|(a, b)| format!("{}..{}", a.min(b), a.max(b)))
    ]
}

fn proto_match() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_string()),
        any::<u8>().prop_map(|p| p.to_string()),
        (any::<u8>(), any::<u8>()).prop_map(|(v, m)| format!("{}/{m:#x}", v & m))
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Random classifier rules in every syntax list, reload as the same table, and their shown
    /// keys delete them.
    #[test]
    fn classifier_rules_round_trip(rules in proptest::collection::vec((ipv4_match(), ipv4_match(), port_match(), proto_match(), 0u32..50), 1..20)) {
        let mut p = reference("sdn-overlay");
        let text: Vec<String> = rules.iter().map(|(s, d, port, proto, pri)| format!("table acl_in add {s} {d} {port} {proto} priority {pri} => allow")).collect();
        p.load_entries("r", &text.join("\n")).unwrap();
        round_trip(&p, reference("sdn-overlay"), &["acl_in"]);
        for l in p.entry_lines("acl_in").unwrap() {
            let key = l.split(" priority ").next().unwrap().replacen(" add ", " del ", 1);
            // Rules with the same fields and other priorities went with an earlier delete.
            let _ = p.apply_command(&key);
        }
        prop_assert_eq!(p.table("acl_in").unwrap().len(), 0);
    }
}
