//! Pure: reads the `exp` claim of a JWT without verifying it.
//!
//! A broker that refuses a token says only "Failed to authenticate",
//! whatever the cause. The client holds the token it sent, so it can tell
//! an expired token (its `exp` has passed) from one refused for another
//! reason (bad signature, another key, malformed). Nothing here trusts the
//! token: the broker has already refused it.

/// The `exp` claim (seconds since the Unix epoch) of a compact JWT, or
/// `None` if `token` is not a JWT or carries no numeric `exp`.
pub(crate) fn expiry(token: &[u8]) -> Option<u64> {
    let mut parts = token.split(|&b| b == b'.');
    let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    top_level_number(&base64url_decode(payload)?, b"exp")
}

/// Decodes unpadded (or padded) base64url, as JWTs use.
fn base64url_decode(text: &[u8]) -> Option<Vec<u8>> {
    let text = text
        .strip_suffix(b"==")
        .or_else(|| text.strip_suffix(b"="))
        .unwrap_or(text);
    let sextet = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        } as u32)
    };
    if text.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.chunks(4) {
        let mut acc = 0u32;
        for &c in chunk {
            acc = acc << 6 | sextet(c)?;
        }
        acc <<= 6 * (4 - chunk.len() as u32);
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// The value of `key` in the top-level JSON object `json`, if it is a
/// non-negative number (a fraction is cut to whole seconds).
fn top_level_number(json: &[u8], key: &[u8]) -> Option<u64> {
    let mut s = Scanner { json, at: 0 };
    s.expect(b'{')?;
    if s.peek()? == b'}' {
        return None;
    }
    loop {
        let name = s.string()?;
        s.expect(b':')?;
        if name == key {
            return s.number();
        }
        s.skip_value(0)?;
        match s.next()? {
            b',' => {}
            _ => return None,
        }
    }
}

struct Scanner<'a> {
    json: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    /// The next byte that is not whitespace, without taking it.
    fn peek(&mut self) -> Option<u8> {
        while let Some(&b) = self.json.get(self.at) {
            if !b.is_ascii_whitespace() {
                return Some(b);
            }
            self.at += 1;
        }
        None
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn expect(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    /// A string's raw bytes (escapes left as they are: keys we look for have none).
    fn string(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.at;
        loop {
            match *self.json.get(self.at)? {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    let json: &'a [u8] = self.json;
                    return Some(&json[start..self.at - 1]);
                }
                _ => self.at += 1,
            }
        }
    }

    fn number(&mut self) -> Option<u64> {
        self.peek()?;
        let start = self.at;
        while self.json.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        let digits = std::str::from_utf8(&self.json[start..self.at]).ok()?;
        let whole = digits.parse().ok()?;
        match self.json.get(self.at) {
            Some(b',' | b'}' | b'.' | b' ' | b'\t' | b'\r' | b'\n') => Some(whole),
            _ => None,
        }
    }

    /// Skips one value of any kind; `depth` bounds nesting.
    fn skip_value(&mut self, depth: usize) -> Option<()> {
        if depth > 64 {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.at += 1;
                if self.peek()? == close {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    if open == b'{' {
                        self.string()?;
                        self.expect(b':')?;
                    }
                    self.skip_value(depth + 1)?;
                    match self.next()? {
                        b',' => {}
                        b if b == close => return Some(()),
                        _ => return None,
                    }
                }
            }
            _ => {
                // A number, true, false or null: up to the next delimiter.
                let start = self.at;
                while self
                    .json
                    .get(self.at)
                    .is_some_and(|b| !b",}] \t\r\n".contains(b))
                {
                    self.at += 1;
                }
                (self.at > start).then_some(())
            }
        }
    }
}

/// base64url without padding (tests only).
#[cfg(test)]
fn b64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let mut buf = [0u8; 3];
        buf[..chunk.len()].copy_from_slice(chunk);
        let n = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]);
        for i in 0..=chunk.len() {
            out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// An unsigned-looking JWT carrying `claims` (tests only: the signature is junk).
#[cfg(test)]
pub(crate) fn jwt(claims: &str) -> Vec<u8> {
    format!(
        "{}.{}.c2ln",
        b64(br#"{"alg":"HS256"}"#),
        b64(claims.as_bytes())
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_exp_wherever_it_stands() {
        assert_eq!(
            expiry(&jwt(r#"{"sub":"app","exp":1700000000}"#)),
            Some(1_700_000_000)
        );
        assert_eq!(expiry(&jwt(r#"{ "exp" : 5 , "sub":"x"}"#)), Some(5));
        assert_eq!(expiry(&jwt(r#"{"exp":1.5}"#)), Some(1));
        assert_eq!(
            expiry(&jwt(
                r#"{"aud":["a","b"],"n":{"exp":1,"s":"\"exp\":2"},"exp":3}"#
            )),
            Some(3),
            "nested objects and strings are skipped"
        );
    }

    #[test]
    fn anything_else_has_no_expiry() {
        assert_eq!(expiry(&jwt(r#"{"sub":"app"}"#)), None);
        assert_eq!(expiry(&jwt(r#"{"exp":"soon"}"#)), None);
        assert_eq!(expiry(&jwt(r#"{"exp":-1}"#)), None);
        assert_eq!(expiry(&jwt("{}")), None);
        assert_eq!(expiry(&jwt("[1]")), None);
        assert_eq!(expiry(b"not-a-jwt"), None);
        assert_eq!(expiry(b"a.b.c.d"), None);
        assert_eq!(expiry(b"a.!!!.c"), None);
    }

    #[test]
    fn base64url_round_trips_with_and_without_padding() {
        for len in 0..10 {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 200) as u8).collect();
            assert_eq!(base64url_decode(b64(&data).as_bytes()), Some(data.clone()));
        }
        assert_eq!(base64url_decode(b"YQ=="), Some(b"a".to_vec()));
        assert_eq!(base64url_decode(b"Y"), None);
    }

    proptest! {
        #[test]
        fn arbitrary_tokens_never_panic(token in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = expiry(&token);
        }

        #[test]
        fn arbitrary_claims_never_panic(claims in ".{0,120}") {
            let _ = expiry(&jwt(&claims));
        }
    }
}
