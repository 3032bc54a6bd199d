//! The IE layer every message and grouped IE shares: the TLV walk (TS 29.244 clause 8.1.1),
//! a bounds-checked reader for IE values, the writer that back-patches lengths, and the
//! `ies!` table that declares which IE goes into which field.
//!
//! ```text
//!  Octets 1-2  Type (bit 8 of octet 1 set: vendor-specific, Enterprise ID present)
//!  Octets 3-4  Length n (everything after octet 4, the Enterprise ID included)
//!  Octets 5-6  Enterprise ID (vendor-specific IEs only)
//!  Octets p..  IE data, or the IEs of a grouped IE
//! ```

use crate::error::{DecodeError, EncodeError, ErrorKind};

/// Where an IE value sits: its type (for errors) and the absolute offset of its first byte.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cx {
    pub ie_type: u16,
    pub off: usize,
}

impl Cx {
    pub fn short(&self, rel: usize) -> DecodeError {
        DecodeError::new(ErrorKind::InvalidLength, self.off + rel, Some(self.ie_type))
    }
    pub fn bad(&self, rel: usize) -> DecodeError {
        DecodeError::new(ErrorKind::IeIncorrect, self.off + rel, Some(self.ie_type))
    }
}

/// A reader over one IE value. Every read is checked; a short value is `InvalidLength` at
/// the offset where the missing byte should have been.
pub(crate) struct Rd<'a> {
    buf: &'a [u8],
    pos: usize,
    pub cx: Cx,
}

impl<'a> Rd<'a> {
    pub fn new(buf: &'a [u8], cx: Cx) -> Self {
        Self { buf, pos: 0, cx }
    }
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(self.cx.short(self.pos))?;
        let s = self.buf.get(self.pos..end).ok_or(self.cx.short(self.buf.len()))?;
        self.pos = end;
        Ok(s)
    }
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(u8::from_be_bytes(self.array()?))
    }
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub fn u24(&mut self) -> Result<u32, DecodeError> {
        let [a, b, c] = self.array()?;
        Ok(u32::from_be_bytes([0, a, b, c]))
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub fn u40(&mut self) -> Result<u64, DecodeError> {
        let [a, b, c, d, e] = self.array()?;
        Ok(u64::from_be_bytes([0, 0, 0, a, b, c, d, e]))
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    /// The rest of the value.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = self.buf.get(self.pos..).unwrap_or_default();
        self.pos = self.buf.len();
        s
    }
}

/// The output buffer. Lengths are back-patched; one that overflows 16 bits is remembered and
/// turned into an [`EncodeError`] by [`crate::encode`].
pub(crate) struct W<'a> {
    pub out: &'a mut Vec<u8>,
    pub overflow: Option<EncodeError>,
}

impl W<'_> {
    pub fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub fn u24(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_be_bytes()[1..]);
    }
    pub fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub fn u40(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_be_bytes()[3..]);
    }
    pub fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    pub fn bytes(&mut self, v: &[u8]) {
        self.out.extend_from_slice(v);
    }

    /// Writes one IE: type, length, the Enterprise ID for vendor IEs, then the value that
    /// `body` writes.
    pub fn ie(&mut self, key: IeKey, body: impl FnOnce(&mut Self)) {
        let start = self.out.len();
        self.u16(key.ie_type);
        self.u16(0);
        if key.is_vendor() {
            self.u16(key.enterprise);
        }
        body(self);
        self.patch_len(start + 2, start + 4, Some(key.ie_type));
    }

    /// Writes `end - len_at_end_of_field` into the u16 at `at`.
    pub fn patch_len(&mut self, at: usize, from: usize, ie_type: Option<u16>) {
        let len = self.out.len().saturating_sub(from);
        let v = match u16::try_from(len) {
            Ok(v) => v,
            Err(_) => {
                self.overflow.get_or_insert(EncodeError { ie_type });
                u16::MAX
            }
        };
        if let Some(dst) = self.out.get_mut(at..at + 2) {
            dst.copy_from_slice(&v.to_be_bytes());
        }
    }
}

/// Which IE a field holds: its type and, for vendor-specific types (≥ 32768), the
/// Enterprise ID (0 for 3GPP IEs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IeKey {
    /// IE type.
    pub ie_type: u16,
    /// Enterprise ID (0 for 3GPP IEs).
    pub enterprise: u16,
}

impl IeKey {
    /// A 3GPP IE.
    pub const fn tgpp(ie_type: u16) -> Self {
        Self { ie_type, enterprise: 0 }
    }
    /// A vendor-specific IE of `enterprise`.
    pub const fn vendor(enterprise: u16, ie_type: u16) -> Self {
        Self { ie_type, enterprise }
    }
    /// Whether the type is in the vendor-specific range (bit 8 of octet 1 set).
    pub const fn is_vendor(&self) -> bool {
        self.ie_type & 0x8000 != 0
    }
}

/// An IE this codec keeps as bytes: an unknown type, a vendor IE it does not type, or a
/// repeat of an IE that may appear once ("the receiver shall process the first instance",
/// TS 29.244 clause 7.6.3). `value` is everything after the 4-byte type/length header, so a
/// vendor IE's value starts with its Enterprise ID. Round-trips byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawIe {
    /// IE type.
    pub ie_type: u16,
    /// The IE's bytes after the length field.
    pub value: Vec<u8>,
}

impl RawIe {
    /// The Enterprise ID of a vendor-specific IE.
    pub fn enterprise(&self) -> Option<u16> {
        match self.value.get(..2) {
            Some(&[a, b]) if self.ie_type & 0x8000 != 0 => Some(u16::from_be_bytes([a, b])),
            _ => None,
        }
    }
    pub(crate) fn emit(&self, w: &mut W) {
        let start = w.out.len();
        w.u16(self.ie_type);
        w.u16(0);
        w.bytes(&self.value);
        w.patch_len(start + 2, start + 4, Some(self.ie_type));
    }
}

/// One IE found by [`next_ie`].
pub(crate) struct IeRef<'a> {
    pub key: IeKey,
    /// The data after the Enterprise ID (vendor IEs) or after the length (3GPP IEs).
    pub data: &'a [u8],
    /// Everything after the length field.
    pub raw: &'a [u8],
    /// Absolute offset of `data`.
    pub data_off: usize,
}

impl IeRef<'_> {
    pub fn cx(&self) -> Cx {
        Cx { ie_type: self.key.ie_type, off: self.data_off }
    }
    pub fn to_raw(&self) -> RawIe {
        RawIe { ie_type: self.key.ie_type, value: self.raw.to_vec() }
    }
}

/// The next IE of `buf` at `*pos` (`base` is the absolute offset of `buf`), or `None` at the
/// end. An IE header or value that runs past `buf` is `InvalidLength` for that IE.
pub(crate) fn next_ie<'a>(buf: &'a [u8], pos: &mut usize, base: usize) -> Result<Option<IeRef<'a>>, DecodeError> {
    let rest = match buf.get(*pos..) {
        Some(r) if !r.is_empty() => r,
        _ => return Ok(None),
    };
    let at = base + *pos;
    let ie_type = match rest {
        [a, b, ..] => u16::from_be_bytes([*a, *b]),
        _ => return Err(DecodeError::new(ErrorKind::InvalidLength, at, None)),
    };
    let len = match rest {
        [_, _, a, b, ..] => usize::from(u16::from_be_bytes([*a, *b])),
        _ => return Err(DecodeError::new(ErrorKind::InvalidLength, at, Some(ie_type))),
    };
    let raw = rest.get(4..4 + len).ok_or(DecodeError::new(ErrorKind::InvalidLength, at + 2, Some(ie_type)))?;
    *pos += 4 + len;
    if ie_type & 0x8000 != 0 {
        let (ent, data) = match raw {
            [a, b, data @ ..] => (u16::from_be_bytes([*a, *b]), data),
            _ => return Err(DecodeError::new(ErrorKind::InvalidLength, at + 2, Some(ie_type))),
        };
        Ok(Some(IeRef { key: IeKey::vendor(ent, ie_type), data, raw, data_off: at + 6 }))
    } else {
        Ok(Some(IeRef { key: IeKey::tgpp(ie_type), data: raw, raw, data_off: at + 4 }))
    }
}

/// An IE value with a fixed wire layout (a leaf IE), or a grouped IE.
pub(crate) trait IeValue: Sized {
    /// Decodes the IE data (after the Enterprise ID for vendor IEs).
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError>;
    /// Writes the IE data.
    fn encode_value(&self, w: &mut W);
}

/// How a struct field holds its IE: `T` (mandatory, once), `Option<T>` (at most once) or
/// `Vec<T>` (any number, in order).
pub(crate) trait Field: Sized {
    type Acc: Default;
    /// Takes one IE; `Ok(false)` when the field is already full (the IE is then kept raw).
    fn accept(acc: &mut Self::Acc, v: &[u8], cx: Cx) -> Result<bool, DecodeError>;
    /// Ends the decode; a mandatory field that saw no IE is `MandatoryIeMissing` at `at`.
    fn finish(acc: Self::Acc, key: IeKey, at: usize) -> Result<Self, DecodeError>;
    fn emit(&self, key: IeKey, w: &mut W);
}

impl<T: IeValue> Field for T {
    type Acc = Option<T>;
    fn accept(acc: &mut Option<T>, v: &[u8], cx: Cx) -> Result<bool, DecodeError> {
        if acc.is_some() {
            return Ok(false);
        }
        *acc = Some(T::decode_value(v, cx)?);
        Ok(true)
    }
    fn finish(acc: Option<T>, key: IeKey, at: usize) -> Result<Self, DecodeError> {
        acc.ok_or(DecodeError::new(ErrorKind::MandatoryIeMissing, at, Some(key.ie_type)))
    }
    fn emit(&self, key: IeKey, w: &mut W) {
        w.ie(key, |w| self.encode_value(w));
    }
}

impl<T: IeValue> Field for Option<T> {
    type Acc = Option<T>;
    fn accept(acc: &mut Option<T>, v: &[u8], cx: Cx) -> Result<bool, DecodeError> {
        <T as Field>::accept(acc, v, cx)
    }
    fn finish(acc: Option<T>, _: IeKey, _: usize) -> Result<Self, DecodeError> {
        Ok(acc)
    }
    fn emit(&self, key: IeKey, w: &mut W) {
        if let Some(v) = self {
            v.emit(key, w);
        }
    }
}

impl<T: IeValue> Field for Vec<T> {
    type Acc = Vec<T>;
    fn accept(acc: &mut Vec<T>, v: &[u8], cx: Cx) -> Result<bool, DecodeError> {
        acc.push(T::decode_value(v, cx)?);
        Ok(true)
    }
    fn finish(acc: Vec<T>, _: IeKey, _: usize) -> Result<Self, DecodeError> {
        Ok(acc)
    }
    fn emit(&self, key: IeKey, w: &mut W) {
        for v in self {
            v.emit(key, w);
        }
    }
}

/// Declares a struct whose fields are IEs: each field names its type and the IE it holds.
/// Decoding walks the IEs once and hands each to the field with its key; the rest go to
/// `unknown`, raw and in order. Encoding writes the fields in declaration order, then
/// `unknown`.
macro_rules! ies {
    (
        $(#[$m:meta])*
        pub struct $name:ident {
            $( $(#[$fm:meta])* $f:ident : $t:ty = $key:expr ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $( $(#[$fm])* pub $f: $t, )*
            /// IEs this codec does not type, and repeats of IEs that may appear once: kept
            /// raw, in the order received, and written after the typed fields.
            pub unknown: Vec<$crate::wire::RawIe>,
        }

        impl $name {
            /// Decodes the IEs of `buf` (`base`: its absolute offset; `at`: where a missing
            /// mandatory IE is reported).
            #[allow(unused_mut, unused_variables, unused_imports)]
            pub(crate) fn decode_ies(buf: &[u8], base: usize, at: usize) -> Result<Self, $crate::error::DecodeError> {
                use $crate::wire::Field;
                $( let mut $f = <<$t as Field>::Acc as Default>::default(); )*
                let mut unknown = Vec::new();
                let mut pos = 0;
                while let Some(ie) = $crate::wire::next_ie(buf, &mut pos, base)? {
                    let taken = $( if ie.key == $key { <$t as Field>::accept(&mut $f, ie.data, ie.cx())? } else )* { false };
                    if !taken {
                        unknown.push(ie.to_raw());
                    }
                }
                Ok(Self { $( $f: <$t as Field>::finish($f, $key, at)?, )* unknown })
            }

            #[allow(unused_imports)]
            pub(crate) fn encode_ies(&self, w: &mut $crate::wire::W) {
                use $crate::wire::Field;
                $( self.$f.emit($key, w); )*
                for u in &self.unknown {
                    u.emit(w);
                }
            }
        }
    };
}

/// Makes an `ies!` struct usable as a grouped IE.
macro_rules! grouped {
    ($($name:ident),* $(,)?) => {$(
        impl $crate::wire::IeValue for $name {
            fn decode_value(v: &[u8], cx: $crate::wire::Cx) -> Result<Self, $crate::error::DecodeError> {
                Self::decode_ies(v, cx.off, cx.off)
            }
            fn encode_value(&self, w: &mut $crate::wire::W) {
                self.encode_ies(w)
            }
        }
    )*};
}

pub(crate) use {grouped, ies};
