//! bcrypt verification on top of the `blowfish` crate's EksBlowfish
//! primitives, without the `bcrypt` crate's base64, getrandom and
//! allocation: parse a `$2a$`/`$2b$`/`$2y$` hash once, verify into stack
//! buffers, compare in constant time.
//!
//! Only verification: the exporter never makes hashes (operators make them
//! with `htpasswd -B`).

use blowfish::Blowfish;
use std::fmt;

/// The alphabet of bcrypt's own base64 (not RFC 4648's order).
const ALPHABET: &[u8; 64] = b"./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A parsed bcrypt hash.
#[derive(Clone, PartialEq, Eq)]
pub struct Hash {
    cost: u32,
    salt: [u8; 16],
    digest: [u8; 23],
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the digest: a hash is a secret too.
        write!(f, "Hash {{ cost: {} }}", self.cost)
    }
}

/// Why a string is not a bcrypt hash; the message is one line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashError {
    Length,
    Prefix,
    Cost,
    Base64,
}

impl fmt::Display for HashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HashError::Length => "not a bcrypt hash (a bcrypt hash is 60 characters)",
            HashError::Prefix => "not a bcrypt hash (expected $2y$, $2b$ or $2a$)",
            HashError::Cost => "bcrypt cost must be 04 to 31",
            HashError::Base64 => "not a bcrypt hash (bad character in salt or digest)",
        })
    }
}

impl Hash {
    /// Parses `$2y$10$<22 salt chars><31 digest chars>`.
    pub fn parse(s: &str) -> Result<Hash, HashError> {
        let b = s.as_bytes();
        if b.len() != 60 {
            return Err(HashError::Length);
        }
        if &b[..2] != b"$2" || !matches!(b[2], b'a' | b'b' | b'y') || b[3] != b'$' || b[6] != b'$' {
            return Err(HashError::Prefix);
        }
        if !b[4].is_ascii_digit() || !b[5].is_ascii_digit() {
            return Err(HashError::Cost);
        }
        let cost = u32::from(b[4] - b'0') * 10 + u32::from(b[5] - b'0');
        if !(4..=31).contains(&cost) {
            return Err(HashError::Cost);
        }
        let mut salt = [0u8; 16];
        let mut digest = [0u8; 23];
        decode(&b[7..29], &mut salt)?;
        decode(&b[29..60], &mut digest)?;
        Ok(Hash { cost, salt, digest })
    }

    /// A hash of `cost` that no password hashes to (its digest is all
    /// zeros): what an unknown user's password is checked against, so that
    /// it takes as long as a known user's.
    pub fn dummy(cost: u32) -> Hash {
        Hash {
            cost,
            salt: *b"gpu-exporter-dmy",
            digest: [0; 23],
        }
    }

    pub fn cost(&self) -> u32 {
        self.cost
    }

    /// Whether `password` hashes to this hash. Takes 2^cost key
    /// expansions whatever the answer; compares in constant time.
    pub fn verify(&self, password: &[u8]) -> bool {
        // The key is the password with its NUL, at most 72 bytes
        // (OpenBSD's and htpasswd's truncation).
        let mut key = [0u8; 72];
        let n = password.len().min(72);
        key[..n].copy_from_slice(&password[..n]);
        let key_len = (password.len() + 1).min(72);
        let out = eks(self.cost, &self.salt, &key[..key_len]);
        let diff = out[..23]
            .iter()
            .zip(self.digest.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        diff == 0
    }
}

/// bcrypt's EksBlowfishSetup and the 64 encryptions of "OrpheanBeholderScryDoubt".
fn eks(cost: u32, salt: &[u8; 16], key: &[u8]) -> [u8; 24] {
    let mut state = Blowfish::bc_init_state();
    state.salted_expand_key(salt, key);
    for _ in 0..(1u64 << cost) {
        state.bc_expand_key(key);
        state.bc_expand_key(salt);
    }
    let mut ctext: [u32; 6] = [
        0x4f72_7068,
        0x6561_6e42,
        0x6568_6f6c,
        0x6465_7253,
        0x6372_7944,
        0x6f75_6274,
    ];
    for pair in ctext.chunks_exact_mut(2) {
        for _ in 0..64 {
            let [l, r] = state.bc_encrypt([pair[0], pair[1]]);
            pair[0] = l;
            pair[1] = r;
        }
    }
    let mut out = [0u8; 24];
    for (chunk, word) in out.chunks_exact_mut(4).zip(ctext.iter()) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// Decodes bcrypt base64 (no padding) into exactly `out.len()` bytes;
/// the unused low bits of the last character are ignored, as OpenBSD does.
fn decode(src: &[u8], out: &mut [u8]) -> Result<(), HashError> {
    let mut acc: u32 = 0;
    let mut bits = 0;
    let mut n = 0;
    for &c in src {
        let v = ALPHABET
            .iter()
            .position(|&a| a == c)
            .ok_or(HashError::Base64)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            if n < out.len() {
                out[n] = (acc >> bits) as u8;
                n += 1;
            }
            acc &= (1 << bits) - 1;
        }
    }
    if n == out.len() {
        Ok(())
    } else {
        Err(HashError::Base64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(hash: &str, password: &[u8]) -> bool {
        Hash::parse(hash).unwrap().verify(password)
    }

    #[test]
    fn known_vectors() {
        // exporter-toolkit web/handler.go: the dummy hash of "fakepassword".
        let dummy = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";
        assert!(check(dummy, b"fakepassword"));
        assert!(!check(dummy, b"fakepassworD"));
        assert!(!check(dummy, b""));
        // exporter-toolkit web/testdata/web_config_users.good.yml, user dave.
        let dave = "$2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq";
        assert!(check(dave, b"dave123"));
        assert!(!check(dave, b"dave1234"));
        // Made with Debian's htpasswd 2.4 (apache2-utils): `htpasswd -nbBC 4 u ''` etc.
        assert!(check(
            "$2y$04$QOYQtfR5/mKPBP/g/kOayu7oRKzQBJiqBhEB5zVbzDsMKHL99clku",
            b""
        ));
        assert!(check(
            "$2y$05$dhBBcrUqYOQncjX3esbAxeM2Fj3gtb6Kr07DKxszK66F1YjfBaE.u",
            b"U*U"
        ));
        let utf8 = "$2y$04$QqtcQcPu9W7pk7RNddaVy.Y9yIUIi0XaOVp1XUuLU5syxF/zD.oiS";
        assert!(check(utf8, "pässwörd:with colon".as_bytes()));
        // 100 and 72 zeros: only the first 72 bytes count.
        let z100 = "$2y$04$RuUdvG1lJWEzDaNciU4Cu.eL5Eru0swvuqvFuwHMGWIAo4uC5U0BS";
        let z72 = "$2y$04$LR/j6oPKzKY5AC6LH7AkruQfdL8QtM/Sf/WQRJad1HWKgf7U2HURy";
        let zeros = [b'0'; 100];
        assert!(check(z100, &zeros));
        assert!(check(z100, &zeros[..72]));
        assert!(check(z72, &zeros[..80]));
        assert!(!check(z72, &zeros[..71]));
        // $2b$ and $2a$ are the same computation for these inputs.
        assert!(check(&dave.replace("$2y$", "$2b$"), b"dave123"));
        assert!(check(&dave.replace("$2y$", "$2a$"), b"dave123"));
    }

    #[test]
    fn refuses_non_hashes() {
        assert_eq!(Hash::parse("doe"), Err(HashError::Length));
        let ok = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";
        assert!(Hash::parse(ok).is_ok());
        assert_eq!(
            Hash::parse(&ok.replace("$2y$", "$2x$")),
            Err(HashError::Prefix)
        );
        assert_eq!(
            Hash::parse(&ok.replace("$10$", "$03$")),
            Err(HashError::Cost)
        );
        assert_eq!(
            Hash::parse(&ok.replace("$10$", "$32$")),
            Err(HashError::Cost)
        );
        assert_eq!(Hash::parse(&ok.replace('Q', "!")), Err(HashError::Base64));
        assert_eq!(
            format!("{:?}", Hash::parse(ok).unwrap()),
            "Hash { cost: 10 }"
        );
    }
}
