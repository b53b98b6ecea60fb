//! `compose/docker-compose.yml` names what chaos expects: 5 primaries with AOF and
//! `appendfsync always`, Toxiproxy preloaded with `node0..node4` pointing at them, Postgres,
//! health checks, fixed container names, and every published port on 127.0.0.1;
//! `docker-compose.offline.yml` swaps in the images `chaos images` tags; `stack.toml` says
//! what the compose file says. The stack itself is brought up by `compose_offline.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use yaml_rust2::{Yaml, YamlLoader};

fn compose_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../compose")
}

fn load() -> Yaml {
    load_file("docker-compose.yml")
}

fn load_file(name: &str) -> Yaml {
    let path = compose_dir().join(name);
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

    // Fixed container names: the same under docker-compose 1.x and `docker compose`.
    for (name, s) in services {
        let name = name.as_str().unwrap_or_default();
        assert_eq!(
            s["container_name"].as_str(),
            Some(format!("redlock-chaos-{name}").as_str()),
            "{name}: container_name"
        );
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

/// Host port published for container port `inner` by `service`.
fn published(doc: &Yaml, service: &str, inner: u16) -> Option<u16> {
    strings(&doc["services"][service]["ports"])
        .iter()
        .find_map(|p| {
            let mut parts = p.rsplit(':');
            let container: u16 = parts.next()?.parse().ok()?;
            let host: u16 = parts.next()?.parse().ok()?;
            (container == inner).then_some(host)
        })
}

#[test]
fn offline_override_swaps_images_and_keeps_the_command_lines() {
    use redlock_chaos::commands::images::{POSTGRES_TAG, TOXIPROXY_TAG, VALKEY_TAG};
    let base = load();
    let offline = load_file("docker-compose.offline.yml");
    let services = offline["services"].as_hash().expect("services");
    assert_eq!(services.len(), 7, "every service gets an offline image");
    for (name, s) in services {
        let name = name.as_str().unwrap_or_default();
        assert!(
            !base["services"][name].is_badvalue(),
            "{name} is not in the base file"
        );
        let want = match name {
            "toxiproxy" => TOXIPROXY_TAG,
            "postgres" => POSTGRES_TAG,
            _ => VALKEY_TAG,
        };
        assert_eq!(s["image"].as_str(), Some(want), "{name}");
        assert_eq!(s["pull_policy"].as_str(), Some("never"), "{name}");
        // Commands, ports, volumes and networks stay the base file's.
        for key in ["command", "entrypoint", "ports", "volumes", "networks"] {
            assert!(s[key].is_badvalue(), "{name} overrides {key}");
        }
    }
    let health = strings(&offline["services"]["toxiproxy"]["healthcheck"]["test"]);
    assert_eq!(
        health[..3],
        ["CMD", "/usr/local/bin/chaos", "toxiproxy-health"],
        "{health:?}"
    );
}

#[test]
fn stack_file_matches_the_compose_file() {
    let doc = load();
    let text = std::fs::read_to_string(compose_dir().join("stack.toml")).expect("stack.toml");
    let stack: toml::Value = toml::from_str(&text).expect("stack.toml is TOML");
    assert_eq!(stack["version"].as_integer(), Some(1));
    assert_eq!(stack["name"].as_str(), Some("compose"));
    let api_port = published(&doc, "toxiproxy", 8474).expect("API published");
    assert_eq!(
        stack["toxiproxy"]["api"].as_str(),
        Some(format!("http://127.0.0.1:{api_port}").as_str())
    );
    let pg = &doc["services"]["postgres"]["environment"];
    let (user, password, db) = (
        pg["POSTGRES_USER"].as_str().expect("user"),
        pg["POSTGRES_PASSWORD"].as_str().expect("password"),
        pg["POSTGRES_DB"].as_str().expect("db"),
    );
    let pg_port = published(&doc, "postgres", 5432).expect("postgres published");
    assert_eq!(
        stack["postgres"]["url"].as_str(),
        Some(format!("postgres://{user}:{password}@127.0.0.1:{pg_port}/{db}").as_str())
    );
    let proxies: Vec<BTreeMap<String, serde_json::Value>> = serde_json::from_str(
        &std::fs::read_to_string(compose_dir().join("toxiproxy.json")).expect("toxiproxy.json"),
    )
    .expect("toxiproxy.json");
    let nodes = stack["node"].as_array().expect("[[node]]");
    assert_eq!(nodes.len(), 5);
    for (i, node) in nodes.iter().enumerate() {
        let service = format!("node{i}");
        let proxy = &proxies[i];
        assert_eq!(node["proxy"].as_str(), proxy["name"].as_str(), "node {i}");
        let listen: u16 = proxy["listen"]
            .as_str()
            .unwrap()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let worker = published(&doc, "toxiproxy", listen).expect("listen port published");
        assert_eq!(
            node["url"].as_str(),
            Some(format!("redis://127.0.0.1:{worker}").as_str()),
            "node {i}"
        );
        let admin = published(&doc, &service, 6379).expect("node port published");
        assert_eq!(
            node["admin_url"].as_str(),
            Some(format!("redis://127.0.0.1:{admin}").as_str()),
            "node {i}"
        );
        assert_eq!(node["control"]["kind"].as_str(), Some("docker"));
        assert_eq!(
            node["control"]["container"].as_str(),
            doc["services"][service.as_str()]["container_name"].as_str(),
            "node {i}"
        );
    }
}
