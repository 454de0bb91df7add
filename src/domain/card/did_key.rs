//! `did:key` for Ed25519: `did:key:z` + base58btc(0xed 0x01 || public key).

use ed25519_dalek::VerifyingKey;

const MULTICODEC_ED25519: [u8; 2] = [0xed, 0x01];

pub fn encode(key: &VerifyingKey) -> String {
    let mut bytes = MULTICODEC_ED25519.to_vec();
    bytes.extend_from_slice(key.as_bytes());
    format!("did:key:z{}", bs58::encode(bytes).into_string())
}

/// The Ed25519 key a `did:key` names; `None` for anything else.
pub fn decode(did: &str) -> Option<VerifyingKey> {
    let encoded = did.strip_prefix("did:key:z")?;
    let bytes = bs58::decode(encoded).into_vec().ok()?;
    let key = bytes.strip_prefix(&MULTICODEC_ED25519)?;
    let key: [u8; 32] = key.try_into().ok()?;
    VerifyingKey::from_bytes(&key).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_examples_from_the_did_key_specification_decode_and_round_trip() {
        for did in [
            "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
            "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp",
            "did:key:z6MkjchhfUsD6mmvni8mCdXHw216Xrm9bQe2mBH1P5RDjVJG",
        ] {
            let key = decode(did).unwrap_or_else(|| panic!("{did}"));
            assert_eq!(encode(&key), did);
        }
    }

    #[test]
    fn other_methods_and_codecs_are_refused() {
        assert!(decode("did:web:example.com").is_none());
        assert!(
            decode("did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme").is_none(),
            "secp256k1"
        );
        assert!(decode("did:key:z6Mk").is_none());
        assert!(decode("did:key:6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK").is_none());
    }
}
