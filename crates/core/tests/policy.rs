//! The policy engine through its public API (gates, permission files, the credential chain, the vault, the audit
//! log, masks), on real files in temporary folders. `policy_paths` drives the same engine through the binary.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use awt_core::policy::audit::{AuditLog, AuditRecord};
use awt_core::policy::credentials::{CredentialError, CredentialSource, Resolver};
use awt_core::policy::permissions::{self, ErrorKind};
use awt_core::policy::vault::{Vault, VaultKey};
use awt_core::policy::{decide, decide_cli, Decision, Gate, LegacyProfile, Masker, RefusalKind, Tier};
use awt_protocol::CredentialDecl;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};

const TIERS: [Tier; 3] = [Tier::Core, Tier::Common, Tier::Personal];

fn anima_with(json: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("permissions.json"), json).unwrap();
    d
}

fn kind(d: &Decision) -> Option<RefusalKind> {
    match d {
        Decision::Allow => None,
        Decision::Deny(r) => Some(r.kind),
    }
}

// ---------------------------------------------------------------- gate

/// permissions.json, tool, action, gate, expected refusal (None = allowed), expected key.
type GateRow = (
    &'static str,
    &'static str,
    &'static str,
    Gate,
    Option<RefusalKind>,
    Option<&'static str>,
);

/// Each row is checked in every tier.
#[test]
fn gate_table() {
    use RefusalKind::*;
    let g = |a: Option<&str>| Gate::new(true, a.map(str::to_string));
    #[rustfmt::skip]
    let rows: Vec<GateRow> = vec![
        // defaults: everything open is allowed, every gated action is refused
        ("{}", "web", "search", Gate::Open, None, None),
        ("{}", "github", "create_issue", g(Some("create-issue")), Some(GrantMissing), Some("github_create-issue")),
        // allow_all true does not open a gate
        (r#"{"external_tools":{"allow_all":true}}"#, "github", "create_issue", g(Some("create-issue")), Some(GrantMissing), Some("github_create-issue")),
        // both spellings of the grant work
        (r#"{"external_tools":{"allow":["github_create-issue"]}}"#, "github", "create_issue", g(Some("create-issue")), None, None),
        (r#"{"external_tools":{"allow":["github_create_issue"]}}"#, "github", "create_issue", g(Some("create-issue")), None, None),
        (r#"{"external_tools":{"allow":["github_create-issue"]}}"#, "github", "create_issue", g(None), None, None),
        // gated_as is the name the grant uses, not the action
        (r#"{"external_tools":{"allow":["github_create_issue"]}}"#, "github", "create_issue", g(Some("write")), Some(GrantMissing), Some("github_write")),
        // a grant for another tool or a prefix does not count
        (r#"{"external_tools":{"allow":["git_create_issue"]}}"#, "github", "create_issue", g(None), Some(GrantMissing), Some("github_create_issue")),
        (r#"{"external_tools":{"allow":["githubcreate_issue", "github_create_issu", "github_create_issue_x"]}}"#, "github", "create_issue", g(None), Some(GrantMissing), None),
        (r#"{"external_tools":{"allow":["GITHUB_CREATE_ISSUE"]}}"#, "github", "create_issue", g(None), Some(GrantMissing), None),
        // deny of the grant wins over allow, in either spelling
        (r#"{"external_tools":{"allow":["github_create-issue"],"deny":["github_create_issue"]}}"#, "github", "create_issue", g(Some("create-issue")), Some(GrantDenied), Some("github_create-issue")),
        // deny of the tool wins over everything
        (r#"{"external_tools":{"allow_all":true,"allow":["github","github_create_issue"],"deny":["github"]}}"#, "github", "create_issue", g(None), Some(ToolDenied), Some("github")),
        (r#"{"external_tools":{"deny":["my_tool"]}}"#, "my-tool", "x", Gate::Open, Some(ToolDenied), Some("my-tool")),
        // whitelist
        (r#"{"external_tools":{"allow_all":false,"allow":["web"]}}"#, "github", "list", Gate::Open, Some(ToolNotAllowed), Some("github")),
        (r#"{"external_tools":{"allow_all":false,"allow":["web"]}}"#, "web", "search", Gate::Open, None, None),
        (r#"{"external_tools":{"allow_all":false,"allow":[]}}"#, "github", "list", Gate::Open, None, None),
        // a grant alone is not a whitelist entry for the tool
        (r#"{"external_tools":{"allow_all":false,"allow":["github_create_issue"]}}"#, "github", "create_issue", g(None), Some(ToolNotAllowed), Some("github")),
        (r#"{"external_tools":{"allow_all":false,"allow":["github","github_create_issue"]}}"#, "github", "create_issue", g(None), None, None),
        // unknown profile: gated under the action's name
        ("{}", "x", "purge_all", Gate::Unknown, Some(GrantMissing), Some("x_purge_all")),
        (r#"{"external_tools":{"allow":["x_purge-all"]}}"#, "x", "purge_all", Gate::Unknown, None, None),
    ];
    for (i, (json, tool, action, gate, want, key)) in rows.into_iter().enumerate() {
        let d = anima_with(json);
        let p = permissions::load(d.path());
        // The rules hold the same in every tier: deny, whitelist and gates alike.
        for tier in TIERS {
            let got = decide(&p, tool, tier, action, &gate);
            assert_eq!(kind(&got), want, "row {i} ({tier}): {json} {tool}.{action}");
            if let (Decision::Deny(r), Some(k)) = (&got, key) {
                assert_eq!(r.key.as_deref(), Some(k), "row {i}");
                assert!(r.message.contains(&format!("\"{k}\"")), "row {i}: {}", r.message);
                assert_eq!(r.permissions_path, d.path().join("permissions.json"));
                assert!(r
                    .message
                    .contains(&d.path().join("permissions.json").display().to_string()));
            }
        }
    }
}

fn legacy() -> serde_json::Map<String, Value> {
    json!({
        "create-issue": {"expected_seconds": 5, "gated": true},
        "purge_all": {"gated": true, "gated_as": "purge"},
        "list": {"gated": false},
        "sync": {"gated": 0},
        "sweep": {"gated": 1},
    })
    .as_object()
    .unwrap()
    .clone()
}

#[test]
fn cli_passthrough_table() {
    let profile = legacy();
    let argv = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    #[rustfmt::skip]
    let rows: Vec<(&str, &str, Option<&str>)> = vec![
        ("{}", "list --repo a/b", None),
        ("{}", "sync", None),
        ("{}", "create-issue --title x", Some("github_create-issue")),
        ("{}", "create_issue", Some("github_create-issue")),
        ("{}", "--repo a/b create-issue", Some("github_create-issue")),
        ("{}", "list --then=create-issue", Some("github_create-issue")),
        ("{}", "list --create-issue", Some("github_create-issue")),
        ("{}", "list --title create_issue", Some("github_create-issue")),
        ("{}", "create-issue=1", Some("github_create-issue")),
        ("{}", "purge-all", Some("github_purge")),
        ("{}", "sweep -j", Some("github_sweep")),
        (r#"{"external_tools":{"allow":["github_create_issue"]}}"#, "create-issue --title x -j", None),
        (r#"{"external_tools":{"allow":["github_create-issue"]}}"#, "list purge_all", Some("github_purge")),
        (r#"{"external_tools":{"allow":["github_purge"]}}"#, "purge-all", None),
        (r#"{"external_tools":{"allow":["github_purge"],"deny":["github_purge"]}}"#, "purge-all", Some("github_purge")),
    ];
    for (json, words, want) in rows {
        let d = anima_with(json);
        let p = permissions::load(d.path());
        for tier in TIERS {
            let got = decide_cli(&p, "github", tier, &argv(words), LegacyProfile::Known(&profile));
            match (want, &got) {
                (None, Decision::Allow) => {}
                (Some(k), Decision::Deny(r)) => {
                    assert_eq!(r.key.as_deref(), Some(k), "{json} {words}")
                }
                _ => panic!("{json} `{words}` ({tier}): got {got:?}, want {want:?}"),
            }
        }
    }
    // No profile: nothing is gated; tool rules still hold.
    let d = anima_with(r#"{"external_tools":{"deny":["github"]}}"#);
    let p = permissions::load(d.path());
    assert_eq!(
        kind(&decide_cli(
            &p,
            "github",
            Tier::Personal,
            &argv("x"),
            LegacyProfile::Absent
        )),
        Some(RefusalKind::ToolDenied)
    );
    let d = anima_with("{}");
    let p = permissions::load(d.path());
    assert!(decide_cli(&p, "github", Tier::Personal, &argv("anything"), LegacyProfile::Absent).is_allow());
}

#[test]
fn cli_with_unreadable_profile_gates_every_word() {
    let d = anima_with(r#"{"external_tools":{"allow":["github_list"]}}"#);
    let p = permissions::load(d.path());
    let argv = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert!(decide_cli(&p, "github", Tier::Common, &argv("list -j"), LegacyProfile::Unreadable).is_allow());
    assert!(decide_cli(
        &p,
        "github",
        Tier::Common,
        &argv("list --repo a/b"),
        LegacyProfile::Unreadable
    )
    .is_allow());
    for (words, key) in [
        ("purge", "github_purge"),
        ("list --mode=purge", "github_purge"),
        ("--x list title", "github_title"),
    ] {
        match decide_cli(&p, "github", Tier::Common, &argv(words), LegacyProfile::Unreadable) {
            Decision::Deny(r) => assert_eq!(r.key.as_deref(), Some(key), "{words}"),
            Decision::Allow => panic!("{words}: must refuse"),
        }
    }
    // A profile whose entries are not objects counts as unreadable.
    let bad = json!({"purge": true}).as_object().unwrap().clone();
    assert!(!decide_cli(&p, "github", Tier::Common, &argv("purge"), LegacyProfile::Known(&bad)).is_allow());
}

#[test]
fn fail_closed_files_refuse_every_call() {
    type Make = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Make)> = vec![
        (
            "malformed",
            Box::new(|d: &Path| std::fs::write(d.join("permissions.json"), "{\"external_tools\": {").unwrap()),
        ),
        (
            "wrong type",
            Box::new(|d: &Path| {
                std::fs::write(d.join("permissions.json"), r#"{"external_tools": {"deny": "github"}}"#).unwrap()
            }),
        ),
        (
            "array for object",
            Box::new(|d: &Path| std::fs::write(d.join("permissions.json"), r#"{"external_tools": []}"#).unwrap()),
        ),
        // Tests run as root, so chmod 000 would still be readable: a directory and a dangling symlink instead.
        (
            "directory",
            Box::new(|d: &Path| std::fs::create_dir(d.join("permissions.json")).unwrap()),
        ),
        (
            "dangling symlink",
            Box::new(|d: &Path| std::os::unix::fs::symlink(d.join("gone"), d.join("permissions.json")).unwrap()),
        ),
        (
            "md directory",
            Box::new(|d: &Path| std::fs::create_dir(d.join("permissions.md")).unwrap()),
        ),
    ];
    for (name, make) in cases {
        let d = tempfile::tempdir().unwrap();
        make(d.path());
        let p = permissions::load(d.path());
        let err = p.as_ref().expect_err(name);
        assert!(
            err.to_string().contains(&d.path().display().to_string()),
            "{name}: {err}"
        );
        for tier in TIERS {
            for gate in [Gate::Open, Gate::Unknown] {
                assert_eq!(
                    kind(&decide(&p, "web", tier, "search", &gate)),
                    Some(RefusalKind::PermissionsUnusable),
                    "{name}"
                );
            }
            assert_eq!(
                kind(&decide_cli(&p, "web", tier, &[], LegacyProfile::Absent)),
                Some(RefusalKind::PermissionsUnusable),
                "{name}"
            );
        }
    }
    // "no" is a boolean to AnimaWorks' loader (pydantic's lax mode); "maybe" is not.
    let d = anima_with("{\n  \"version\": 1,\n  \"external_tools\": {\"allow_all\": \"maybe\"}\n}");
    let e = permissions::load(d.path()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert_eq!(e.location.map(|l| l.0), Some(3));
    assert!(e.reason.contains("boolean"), "{}", e.reason);
}

// ---------------------------------------------------------------- credentials

struct Data {
    dir: tempfile::TempDir,
    key: VaultKey,
}

impl Data {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let raw = [42u8; 32];
        std::fs::write(dir.path().join("vault.key"), format!("{}\n", STANDARD.encode(raw))).unwrap();
        let key = VaultKey::from_text(&STANDARD.encode(raw)).unwrap();
        Data { dir, key }
    }
    fn p(&self) -> &Path {
        self.dir.path()
    }
    fn seal(&self, s: &str) -> String {
        STANDARD.encode(
            self.key
                .public_key()
                .seal(&mut crypto_box::aead::OsRng, s.as_bytes())
                .unwrap(),
        )
    }
    fn vault(&self, shared: Value) {
        std::fs::write(self.p().join("vault.json"), json!({ "shared": shared }).to_string()).unwrap();
    }
    fn config(&self, creds: Value) {
        std::fs::write(
            self.p().join("config.json"),
            json!({ "version": 1, "credentials": creds }).to_string(),
        )
        .unwrap();
    }
    fn shared(&self, v: Value) {
        std::fs::create_dir_all(self.p().join("shared")).unwrap();
        std::fs::write(self.p().join("shared/credentials.json"), v.to_string()).unwrap();
    }
}

fn decl(per_anima: bool, required: bool) -> CredentialDecl {
    CredentialDecl {
        name: "slack".into(),
        env: "SLACK_TOKEN".into(),
        key: "api_key".into(),
        per_anima,
        required,
    }
}

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn resolve(
    d: &Data,
    anima: Option<&str>,
    e: &[(&str, &str)],
    c: &CredentialDecl,
) -> Result<Option<(String, CredentialSource)>, CredentialError> {
    Resolver::new(d.p(), anima, env(e))
        .resolve(c)
        .map(|o| o.map(|r| (r.value, r.source)))
}

#[test]
fn credential_each_source_alone() {
    let c = decl(false, true);
    // config.json api_key
    let d = Data::new();
    d.config(json!({"slack": {"type": "api_key", "api_key": "from-config", "keys": {}}}));
    assert_eq!(resolve(&d, None, &[], &c).unwrap().unwrap().0, "from-config");
    // config.json keys.<key>
    let d = Data::new();
    d.config(json!({"slack": {"api_key": "", "keys": {"bot": "from-keys"}}}));
    let c2 = CredentialDecl {
        key: "bot".into(),
        ..c.clone()
    };
    let (v, src) = resolve(&d, None, &[], &c2).unwrap().unwrap();
    assert_eq!(v, "from-keys");
    assert_eq!(
        src,
        CredentialSource::Config {
            key_path: "credentials.slack.keys.bot".into()
        }
    );
    // config.json {"$vault": K}
    let d = Data::new();
    d.config(json!({"slack": {"api_key": {"$vault": "SLACK_REF"}}}));
    d.vault(json!({"SLACK_REF": d.seal("from-config-vault")}));
    let (v, src) = resolve(&d, None, &[], &c).unwrap().unwrap();
    assert_eq!(v, "from-config-vault");
    assert!(matches!(src, CredentialSource::ConfigVault { .. }));
    // A $vault reference to a key the vault does not hold (or to no key) refuses, as AnimaWorks' config load
    // fails on it: the environment's value is not taken instead.
    for reference in [json!("NOT_THERE"), json!(""), json!(5)] {
        d.config(json!({"slack": {"api_key": {"$vault": reference}}}));
        match resolve(&d, None, &[("SLACK_TOKEN", "from-env")], &c) {
            Err(CredentialError::Source { reason, .. }) => assert!(reason.contains("$vault"), "{reason}"),
            other => panic!("{reference}: {other:?}"),
        }
    }
    // vault.json shared.<ENV>
    let d = Data::new();
    d.vault(json!({"SLACK_TOKEN": d.seal("from-vault")}));
    assert_eq!(resolve(&d, None, &[], &c).unwrap().unwrap().0, "from-vault");
    // vault plaintext passthrough
    let d = Data::new();
    d.vault(json!({"SLACK_TOKEN": "plain-in-vault!"}));
    assert_eq!(resolve(&d, None, &[], &c).unwrap().unwrap().0, "plain-in-vault!");
    // shared/credentials.json
    let d = Data::new();
    d.shared(json!({"SLACK_TOKEN": "from-shared"}));
    assert_eq!(
        resolve(&d, None, &[], &c).unwrap().unwrap().1,
        CredentialSource::SharedCredentials {
            key: "SLACK_TOKEN".into()
        }
    );
    // environment
    let d = Data::new();
    assert_eq!(
        resolve(&d, None, &[("SLACK_TOKEN", "from-env")], &c)
            .unwrap()
            .unwrap()
            .0,
        "from-env"
    );
}

#[test]
fn credential_precedence() {
    let c = decl(true, true);
    let d = Data::new();
    let all_env = [("SLACK_TOKEN", "env"), ("SLACK_TOKEN__alice", "env-alice")];
    d.config(json!({"slack": {"api_key": "config"}}));
    d.vault(json!({"SLACK_TOKEN": d.seal("vault"), "SLACK_TOKEN__alice": d.seal("vault-alice")}));
    d.shared(json!({"SLACK_TOKEN": "shared", "SLACK_TOKEN__alice": "shared-alice"}));
    let order = |d: &Data| resolve(d, Some("alice"), &all_env, &c).unwrap().unwrap().0;
    assert_eq!(order(&d), "config");
    d.config(json!({"slack": {"api_key": ""}}));
    assert_eq!(order(&d), "vault-alice");
    d.vault(json!({"SLACK_TOKEN": d.seal("vault")}));
    assert_eq!(order(&d), "shared-alice");
    d.shared(json!({"SLACK_TOKEN": "shared"}));
    assert_eq!(order(&d), "env-alice", "every per-anima source before any shared key");
    assert_eq!(
        resolve(&d, Some("alice"), &[("SLACK_TOKEN", "env")], &c)
            .unwrap()
            .unwrap()
            .0,
        "vault"
    );
    std::fs::remove_file(d.p().join("vault.json")).unwrap();
    assert_eq!(
        resolve(&d, Some("alice"), &[("SLACK_TOKEN", "env")], &c)
            .unwrap()
            .unwrap()
            .0,
        "shared"
    );
    std::fs::remove_file(d.p().join("shared/credentials.json")).unwrap();
    assert_eq!(
        resolve(&d, Some("alice"), &[("SLACK_TOKEN", "env")], &c)
            .unwrap()
            .unwrap()
            .0,
        "env"
    );
    // Not per_anima: the per-anima keys are not consulted.
    assert_eq!(
        resolve(&d, Some("alice"), &all_env, &decl(false, true))
            .unwrap()
            .unwrap()
            .0,
        "env"
    );
    // No anima: the per-anima keys are not consulted.
    assert_eq!(resolve(&d, None, &all_env, &c).unwrap().unwrap().0, "env");
}

#[test]
fn missing_required_credential_names_every_place_and_no_secret() {
    let d = Data::new();
    d.config(json!({"other": {"api_key": "other-secret-value"}}));
    d.vault(json!({"OTHER": d.seal("other-vault-secret")}));
    let e = resolve(
        &d,
        Some("alice"),
        &[("UNRELATED", "env-secret-value")],
        &decl(true, true),
    )
    .unwrap_err();
    let msg = e.to_string();
    for want in [
        "config.json",
        "credentials.slack.api_key",
        "vault.json",
        "shared.SLACK_TOKEN__alice or SLACK_TOKEN",
        "credentials.json",
        "environment variable SLACK_TOKEN__alice or SLACK_TOKEN",
    ] {
        assert!(msg.contains(want), "{want} in {msg}");
    }
    for secret in ["other-secret-value", "other-vault-secret", "env-secret-value"] {
        assert!(!msg.contains(secret) && !format!("{e:?}").contains(secret));
    }
    // Not required: simply absent.
    assert_eq!(resolve(&d, None, &[], &decl(false, false)).unwrap(), None);
}

#[test]
fn broken_sources_are_errors_not_skipped() {
    let c = decl(false, true);
    let d = Data::new();
    std::fs::write(d.p().join("config.json"), "{ nope").unwrap();
    assert!(matches!(
        resolve(&d, None, &[("SLACK_TOKEN", "env")], &c),
        Err(CredentialError::Source { .. })
    ));
    let d = Data::new();
    std::fs::write(d.p().join("vault.json"), "[]").unwrap();
    assert!(matches!(
        resolve(&d, None, &[("SLACK_TOKEN", "env")], &c),
        Err(CredentialError::Source { .. })
    ));
    let d = Data::new();
    d.vault(json!({"SLACK_TOKEN": "anything"}));
    std::fs::remove_file(d.p().join("vault.key")).unwrap();
    let e = resolve(&d, None, &[], &c).unwrap_err();
    assert!(e.to_string().contains("vault.key"), "{e}");
    // A vault with entries for other keys and no vault.key is fine when the lookup never needs it.
    let d = Data::new();
    d.vault(json!({"OTHER": "x"}));
    std::fs::remove_file(d.p().join("vault.key")).unwrap();
    assert_eq!(
        resolve(&d, None, &[("SLACK_TOKEN", "env")], &c).unwrap().unwrap().0,
        "env"
    );
}

#[test]
fn resolved_debug_hides_value() {
    let d = Data::new();
    let r = Resolver::new(d.p(), None, env(&[("SLACK_TOKEN", "hidden-value")]))
        .resolve_all([&decl(false, true)])
        .unwrap();
    assert_eq!(r.len(), 1);
    assert!(!format!("{r:?}").contains("hidden-value"));
}

// ---------------------------------------------------------------- vault fixtures

fn check_vectors(dir: &Path) {
    let vectors: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("vault_vectors.json")).unwrap()).unwrap();
    let key = VaultKey::from_text(&std::fs::read_to_string(dir.join("vault.key")).unwrap()).unwrap();
    assert_eq!(
        STANDARD.encode(key.public_key().as_bytes()),
        vectors["public_key_b64"].as_str().unwrap()
    );
    let vault = Vault::load(dir).unwrap();
    let entries = vectors["entries"].as_array().unwrap();
    assert!(!entries.is_empty());
    for e in entries {
        let ct = e["ciphertext_b64"].as_str().unwrap();
        let plain = e["plaintext"].as_str().unwrap();
        assert_eq!(key.open(ct).as_deref(), Some(plain), "{e}");
        assert_eq!(
            STANDARD.decode(ct).unwrap().len(),
            e["ciphertext_len"].as_u64().unwrap() as usize
        );
        let got = vault
            .get(e["section"].as_str().unwrap(), e["key"].as_str().unwrap())
            .unwrap();
        assert_eq!(got.as_deref(), Some(plain));
    }
    let pt = &vectors["plaintext_passthrough_example"];
    assert_eq!(
        key.open_or_passthrough(pt["stored"].as_str().unwrap()),
        pt["decrypt_returns"].as_str().unwrap()
    );
}

fn own_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vault")
}

#[test]
fn vault_vectors_of_the_original() {
    // The original's vectors, copied from the shared fixtures into the repository.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/vault");
    check_vectors(&dir);
}

#[test]
fn vault_vectors_of_our_own() {
    check_vectors(&own_fixtures());
}

/// Writes `crates/core/tests/fixtures/vault/` anew: `cargo test -p animaworks-tool-core --test policy -- --ignored
/// generate_vault_vectors`. Sealed with crypto_box's `seal`, the same construction as libsodium's
/// `crypto_box_seal`; the shared fixtures of the original prove the two agree.
#[test]
#[ignore]
fn generate_vault_vectors() {
    let dir = own_fixtures();
    std::fs::create_dir_all(&dir).unwrap();
    let sk = crypto_box::SecretKey::generate(&mut crypto_box::aead::OsRng);
    let key_text = format!("{}\n", STANDARD.encode(sk.to_bytes()));
    let key = VaultKey::from_text(&key_text).unwrap();
    let items = [
        ("shared", "DEMO_TOKEN", "rust-tok-456"),
        ("shared", "EMPTY", ""),
        ("shared", "UNICODE", "秘密-ключ-🔐"),
        ("bob", "note", "per-anima value of bob"),
    ];
    let mut vault = serde_json::Map::new();
    let mut entries = Vec::new();
    for (section, k, plain) in items {
        let ct = STANDARD.encode(
            key.public_key()
                .seal(&mut crypto_box::aead::OsRng, plain.as_bytes())
                .unwrap(),
        );
        vault.entry(section).or_insert_with(|| json!({}))[k] = json!(ct);
        entries.push(
            json!({"section": section, "key": k, "plaintext": plain, "ciphertext_b64": ct,
            "ciphertext_len": plain.len() + 48, "plaintext_utf8_len": plain.len()}),
        );
    }
    vault["shared"]["PLAIN"] = json!("not-base64!");
    let vectors = json!({
        "about": "vectors made by crates/core/tests/policy.rs generate_vault_vectors (crypto_box seal = libsodium crypto_box_seal)",
        "vault_key_file_text": key_text,
        "secret_key_b64": key_text.trim(),
        "public_key_b64": STANDARD.encode(key.public_key().as_bytes()),
        "entries": entries,
        "plaintext_passthrough_example": {"stored": "not-base64!", "decrypt_returns": "not-base64!"},
    });
    std::fs::write(dir.join("vault.key"), &key_text).unwrap();
    std::fs::write(
        dir.join("vault.json"),
        serde_json::to_string_pretty(&vault).unwrap() + "\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("vault_vectors.json"),
        serde_json::to_string_pretty(&vectors).unwrap() + "\n",
    )
    .unwrap();
}

// ---------------------------------------------------------------- audit and masks

fn record(i: usize, secret: &str) -> AuditRecord {
    AuditRecord::new(
        Some("alice"),
        "web",
        Some("search"),
        Some(Tier::Personal),
        &Decision::Allow,
        i as u64,
        "ok",
        Some(0),
        json!({"i": i, "secret": secret, "pad": "x".repeat(20_000)}),
    )
}

/// Child half of `audit_appends_never_interleave_across_processes`: appends when told to by the parent.
#[test]
fn audit_child_writer() {
    let Ok(path) = std::env::var("POLICY_AUDIT_CHILD_PATH") else {
        return;
    };
    let log = AuditLog::at(path);
    let m = Masker::new(["child-secret"]);
    for i in 0..50 {
        log.append(&record(i, "child-secret"), &m).unwrap();
    }
}

#[test]
fn audit_appends_never_interleave_across_threads_and_processes() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("state/tool_audit.jsonl");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(&exe)
                .args(["--exact", "audit_child_writer", "--test-threads=1"])
                .env("POLICY_AUDIT_CHILD_PATH", &path)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let log = AuditLog::at(&path);
                let m = Masker::new(["thread-secret"]);
                for i in 0..50 {
                    log.append(&record(i, "thread-secret"), &m).unwrap();
                }
            });
        }
    });
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7 * 50);
    for l in lines {
        let v: Value = serde_json::from_str(l).expect("every line is whole JSON");
        // The 20 kB arguments are logged bounded (start, length, digest), masked before the cut.
        assert!(
            v["args"]["truncated"].as_str().unwrap().contains(r#""secret":"***""#),
            "{v}"
        );
    }
    assert!(!text.contains("-secret"));
}

#[test]
fn audit_of_a_refusal_carries_kind_and_key() {
    let d = anima_with("{}");
    let p = permissions::load(d.path());
    let dec = decide(
        &p,
        "github",
        Tier::Core,
        "create_issue",
        &Gate::new(true, Some("create-issue".into())),
    );
    let rec = AuditRecord::new(
        None,
        "github",
        Some("create_issue"),
        Some(Tier::Core),
        &dec,
        0,
        "permission_denied",
        None,
        json!({}),
    );
    let log = AuditLog::for_anima(d.path());
    log.append(&rec, &Masker::default()).unwrap();
    let v: Value = serde_json::from_str(std::fs::read_to_string(log.path()).unwrap().trim()).unwrap();
    assert_eq!(v["decision"], "deny");
    assert!(v["reason"].as_str().unwrap().starts_with("grant_missing: "));
    assert!(v["reason"].as_str().unwrap().contains("github_create-issue"));
    assert_eq!(v["anima"], Value::Null);
    assert_eq!(v["exit_code"], Value::Null);
}

#[test]
fn masker_covers_resolved_secrets_in_nested_results() {
    let d = Data::new();
    d.vault(json!({"SLACK_TOKEN": d.seal("xoxb-123456")}));
    let r = Resolver::new(d.p(), None, HashMap::new())
        .resolve_all([&decl(false, true)])
        .unwrap();
    let m = Masker::new(r.iter().map(|c| c.value.as_str()));
    let out = m.mask_value(&json!({"echo": ["Bearer xoxb-123456", {"k": "xoxb-123456"}], "n": 1}));
    assert_eq!(out, json!({"echo": ["Bearer ***", {"k": "***"}], "n": 1}));
    assert_eq!(m.mask_str("stderr: token=xoxb-123456\n"), "stderr: token=***\n");
}
