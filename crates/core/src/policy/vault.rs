//! The AnimaWorks credential vault: `<data dir>/vault.json` holds `{section: {key: base64(sealed box)}}`,
//! `<data dir>/vault.key` the base64 X25519 private key that opens them.
//!
//! A sealed box is libsodium's `crypto_box_seal` (PyNaCl `SealedBox`): the ephemeral public key (32 bytes)
//! followed by an XSalsa20-Poly1305 box of the plaintext, whose nonce is BLAKE2b-192(ephemeral pk ‖
//! recipient pk). `crypto_box`'s `SecretKey::unseal` implements exactly that.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use crypto_box::SecretKey;

/// `vault.json` in the data directory.
pub const VAULT_FILE: &str = "vault.json";
/// `vault.key` in the data directory.
pub const KEY_FILE: &str = "vault.key";

/// Bytes a sealed box adds to its plaintext: the ephemeral public key (32) and the Poly1305 tag (16).
pub const SEAL_OVERHEAD: usize = 48;

/// A vault file or key that exists but cannot be used. Never carries a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct VaultError {
    /// The file at fault.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

/// Why the text of `vault.key` is not a key. Never carries the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The text is not standard base64.
    #[error("not base64 ({0})")]
    NotBase64(base64::DecodeError),
    /// The text decodes to this many bytes instead of 32.
    #[error("holds {0} bytes, a key is 32")]
    WrongLength(usize),
}

/// The vault's private key. Its `Debug` never shows the key; the inner key is zeroed on drop.
pub struct VaultKey(SecretKey);

impl fmt::Debug for VaultKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("VaultKey(…)")
    }
}

impl VaultKey {
    /// Parses the text of `vault.key`: standard base64 of 32 bytes, surrounding whitespace ignored.
    ///
    /// # Errors
    /// [`KeyError`] (never the key) when the text is not base64 of exactly 32 bytes.
    pub fn from_text(text: &str) -> Result<Self, KeyError> {
        let bytes = STANDARD.decode(text.trim()).map_err(KeyError::NotBase64)?;
        let arr: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| KeyError::WrongLength(bytes.len()))?;
        Ok(VaultKey(SecretKey::from(arr)))
    }

    /// The matching public key (what a writer seals to).
    pub fn public_key(&self) -> crypto_box::PublicKey {
        self.0.public_key()
    }

    /// Opens one stored value with AnimaWorks' rule: a value that is not standard base64, or not a sealed box
    /// for this key, or whose plaintext is not UTF-8, is returned as it is (plaintext passthrough).
    pub fn open_or_passthrough(&self, stored: &str) -> String {
        self.open(stored).unwrap_or_else(|| stored.to_string())
    }

    /// Opens one stored value; `None` when it is not a sealed box for this key holding UTF-8 text.
    pub fn open(&self, stored: &str) -> Option<String> {
        let bytes = STANDARD.decode(stored.trim()).ok()?;
        if bytes.len() < SEAL_OVERHEAD {
            return None;
        }
        let plain = self.0.unseal(&bytes).ok()?;
        String::from_utf8(plain).ok()
    }
}

/// `vault.json` and `vault.key` of one data directory, read once.
#[derive(Debug)]
pub struct Vault {
    path: PathBuf,
    key_path: PathBuf,
    sections: BTreeMap<String, BTreeMap<String, String>>,
    key: Result<Option<VaultKey>, VaultError>,
}

fn read_optional(path: &Path) -> Result<Option<String>, VaultError> {
    crate::fsread::read_to_string_if_present(path, crate::fsread::SMALL).map_err(|e| VaultError {
        path: path.into(),
        reason: format!("cannot read: {e}"),
    })
}

impl Vault {
    /// Reads `<data dir>/vault.json` (absent → an empty vault) and `<data dir>/vault.key` (absent → values
    /// cannot be opened; that is an error only when one is asked for).
    ///
    /// # Errors
    /// When `vault.json` exists but cannot be read or is not `{section: {key: string}}`. Values that are not
    /// strings are an error, since a value the reader skips could hide the secret meant to be used.
    pub fn load(data_dir: &Path) -> Result<Self, VaultError> {
        let path = data_dir.join(VAULT_FILE);
        let key_path = data_dir.join(KEY_FILE);
        let sections = match read_optional(&path)? {
            None => BTreeMap::new(),
            Some(text) => serde_json::from_str(&text).map_err(|e| VaultError {
                path: path.clone(),
                reason: format!("not a vault file ({{section: {{key: string}}}}): {e}"),
            })?,
        };
        let key = match read_optional(&key_path) {
            Ok(None) => Ok(None),
            Ok(Some(text)) => VaultKey::from_text(&text).map(Some).map_err(|e| VaultError {
                path: key_path.clone(),
                reason: e.to_string(),
            }),
            Err(e) => Err(e),
        };
        Ok(Vault {
            path,
            key_path,
            sections,
            key,
        })
    }

    /// The path of `vault.json`, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The opened value of `section.key`, `Ok(None)` when there is no such entry.
    ///
    /// # Errors
    /// When the entry exists but `vault.key` is missing or unusable (the value cannot be opened, and handing
    /// the sealed text to a tool as if it were the secret would be wrong).
    pub fn get(&self, section: &str, key: &str) -> Result<Option<String>, VaultError> {
        let Some(stored) = self.sections.get(section).and_then(|s| s.get(key)) else {
            return Ok(None);
        };
        match &self.key {
            Ok(Some(k)) => Ok(Some(k.open_or_passthrough(stored))),
            Ok(None) => Err(VaultError {
                path: self.key_path.clone(),
                reason: format!(
                    "missing, so vault entry {section}.{key} of {} cannot be opened",
                    self.path.display()
                ),
            }),
            Err(e) => Err(e.clone()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Seals `plain` to `pk` as libsodium's `crypto_box_seal` does; test-only (the runner never writes vault
    /// values).
    pub(crate) fn seal(pk: &crypto_box::PublicKey, plain: &str) -> String {
        let mut rng = crypto_box::aead::OsRng;
        STANDARD.encode(pk.seal(&mut rng, plain.as_bytes()).unwrap())
    }

    #[test]
    fn roundtrip_and_passthrough() {
        let key = VaultKey::from_text(&STANDARD.encode([7u8; 32])).unwrap();
        let sealed = seal(&key.public_key(), "hello");
        assert_eq!(STANDARD.decode(&sealed).unwrap().len(), 5 + SEAL_OVERHEAD);
        assert_eq!(key.open(&sealed).as_deref(), Some("hello"));
        // Not base64, too short, sealed to another key: passed through as stored.
        assert_eq!(key.open_or_passthrough("not-base64!"), "not-base64!");
        assert_eq!(key.open_or_passthrough("aGVsbG8="), "aGVsbG8=");
        let other = VaultKey::from_text(&STANDARD.encode([8u8; 32])).unwrap();
        assert_eq!(other.open_or_passthrough(&sealed), sealed);
    }

    #[test]
    fn bad_keys_are_refused_without_echoing_them() {
        assert!(VaultKey::from_text("%%%")
            .unwrap_err()
            .to_string()
            .contains("not base64"));
        let e = VaultKey::from_text(&STANDARD.encode([1u8; 31])).unwrap_err();
        assert_eq!(e, KeyError::WrongLength(31));
        assert!(e.to_string().contains("31 bytes"), "{e}");
        assert_eq!(
            format!("{:?}", VaultKey::from_text(&STANDARD.encode([1u8; 32])).unwrap()),
            "VaultKey(…)"
        );
    }

    #[test]
    fn missing_key_errors_only_when_a_value_is_needed() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(VAULT_FILE), r#"{"shared": {"A": "xyz"}}"#).unwrap();
        let v = Vault::load(d.path()).unwrap();
        assert_eq!(v.get("shared", "B").unwrap(), None);
        let e = v.get("shared", "A").unwrap_err();
        assert!(e.to_string().contains("vault.key"), "{e}");
        assert!(!e.to_string().contains("xyz"));
    }

    #[test]
    fn malformed_vault_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(VAULT_FILE), r#"{"shared": {"A": 1}}"#).unwrap();
        assert!(Vault::load(d.path()).is_err());
        std::fs::write(d.path().join(VAULT_FILE), r#"{"shared": "#).unwrap();
        assert!(Vault::load(d.path()).is_err());
        let d = tempfile::tempdir().unwrap();
        assert!(Vault::load(d.path()).unwrap().get("shared", "A").unwrap().is_none());
    }
}
