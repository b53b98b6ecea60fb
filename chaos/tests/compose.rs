//! `compose/docker-compose.yml` names what chaos expects: 5 primaries with AOF and
//! `appendfsync always`, Toxiproxy preloaded with `node0..node4` pointing at them, Postgres,
//! health checks, and every published port on 127.0.0.1. The stack itself is not started
//! here (CI has no registry to pull its images from).

use std::collections::BTreeMap;
use std::path::PathBuf;

use yaml_rust2::{Yaml, YamlLoader};

fn compose_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../compose")
}

fn load() -> Yaml {
    let path = compose_dir().join("docker-compose.yml");
    let text = std::fs::read_to_string(&path).expect("read compose file");
    let mut docs = YamlLoader::load_from_str(&text).expect("valid YAML");
    assert_eq!(docs.len(), 1);
    docs.remove(0)
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec()
        .map(|v| {
            v.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn has_healthcheck(svc: &Yaml) -> bool {
    !strings(&svc["healthcheck"]["test"]).is_empty()
}

#[test]
fn compose_stack_names_what_chaos_expects() {
    let doc = load();
    let services = doc["services"].as_hash().expect("services");
    let svc = |name: &str| &doc["services"][name];

    // Five primaries with AOF, fsync always, data on a volume, health checks.
    for i in 0..5 {
        let name = format!("node{i}");
        let s = svc(&name);
        assert!(!s.is_badvalue(), "missing service {name}");
        let image = s["image"].as_str().unwrap_or_default();
        assert!(
            image.starts_with("valkey/valkey:8") || image.starts_with("redis:7"),
            "{name}: {image}"
        );
        let cmd = strings(&s["command"]).join(" ");
        assert!(cmd.contains("--appendonly yes"), "{name}: {cmd}");
        assert!(cmd.contains("--appendfsync always"), "{name}: {cmd}");
        let vols = strings(&s["volumes"]);
        assert!(
            vols.iter().any(|v| v.ends_with(":/data")),
            "{name}: {vols:?}"
        );
        assert!(has_healthcheck(s), "{name} has no healthcheck");
    }

    // Toxiproxy with its config mounted.
    let t = svc("toxiproxy");
    assert!(
        t["image"]
            .as_str()
            .unwrap_or_default()
            .starts_with("ghcr.io/shopify/toxiproxy")
    );
    assert!(
        strings(&t["command"])
            .iter()
            .any(|c| c.starts_with("-config="))
    );
    assert!(
        strings(&t["volumes"])
            .iter()
            .any(|v| v.starts_with("./toxiproxy.json:"))
    );
    assert!(has_healthcheck(t), "toxiproxy has no healthcheck");

    // Postgres outside the fault domain (not on the primaries' network).
    let pg = svc("postgres");
    assert!(
        pg["image"]
            .as_str()
            .unwrap_or_default()
            .starts_with("postgres:15")
    );
    assert!(has_healthcheck(pg), "postgres has no healthcheck");
    assert_ne!(strings(&pg["networks"]), strings(&svc("node0")["networks"]));

    // Every published port is on loopback; collect the toxiproxy's container ports.
    let mut toxi_published = Vec::new();
    for (name, s) in services {
        let name = name.as_str().unwrap_or_default();
        for p in strings(&s["ports"]) {
            assert!(
                p.starts_with("127.0.0.1:"),
                "{name} publishes {p} beyond loopback"
            );
            if name == "toxiproxy" {
                toxi_published.push(p.rsplit(':').next().unwrap().to_owned());
            }
        }
    }
    assert!(
        toxi_published.contains(&"8474".to_owned()),
        "API not published"
    );

    // The Toxiproxy config: node0..node4 → the primaries, listen ports published.
    let cfg: Vec<BTreeMap<String, serde_json::Value>> = serde_json::from_str(
        &std::fs::read_to_string(compose_dir().join("toxiproxy.json")).expect("toxiproxy.json"),
    )
    .expect("toxiproxy.json is a list of proxies");
    assert_eq!(cfg.len(), 5);
    for (i, p) in cfg.iter().enumerate() {
        assert_eq!(p["name"], format!("node{i}"));
        let upstream = p["upstream"].as_str().unwrap();
        let (host, port) = upstream.split_once(':').unwrap();
        assert!(
            !svc(host).is_badvalue(),
            "upstream {upstream} is not a service"
        );
        assert_eq!(port, "6379");
        assert_eq!(host, format!("node{i}"));
        let listen_port = p["listen"].as_str().unwrap().rsplit(':').next().unwrap();
        assert!(
            toxi_published.iter().any(|c| c == listen_port),
            "proxy node{i} listens on {listen_port}, which is not published"
        );
    }
}
