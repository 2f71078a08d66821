//! A cursor over Thrift compact-protocol bytes (the encoding of Parquet's metadata and page
//! headers) that never allocates from a declared count and never recurses deeper than the
//! format's own structs: every list and string must fit in the bytes that remain.
//! <https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md>

use super::parquet_bounds::{R, Refusal};

/// The structs of parquet.thrift nest at most 7 deep; anything deeper is not Parquet.
const THRIFT_DEPTH: u32 = 16;

pub(super) const T_TRUE: u8 = 1;
pub(super) const T_FALSE: u8 = 2;
pub(super) const T_BYTE: u8 = 3;
pub(super) const T_I16: u8 = 4;
pub(super) const T_I32: u8 = 5;
pub(super) const T_I64: u8 = 6;
pub(super) const T_DOUBLE: u8 = 7;
pub(super) const T_BINARY: u8 = 8;
pub(super) const T_LIST: u8 = 9;
pub(super) const T_SET: u8 = 10;
pub(super) const T_MAP: u8 = 11;
pub(super) const T_STRUCT: u8 = 12;
pub(super) const T_UUID: u8 = 13;

/// A cursor over thrift compact-protocol bytes that never allocates from a declared count.
pub(super) struct Thrift<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Thrift<'a> {
    /// A cursor at the start of `buf`.
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn byte(&mut self) -> R<u8> {
        let b = *self.buf.get(self.pos).ok_or_else(truncated)?;
        self.pos += 1;
        Ok(b)
    }

    pub(super) fn advance(&mut self, n: u64) -> R<()> {
        if n > self.remaining() as u64 {
            return Err(truncated());
        }
        self.pos += n as usize;
        Ok(())
    }

    fn varint(&mut self) -> R<u64> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift.min(63);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a malformed varint in its metadata".into())
    }

    pub(super) fn zigzag(&mut self) -> R<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// The next field's id and type, `None` at the struct's end.
    pub(super) fn field(&mut self, last: &mut i16) -> R<Option<(i16, u8)>> {
        let h = self.byte()?;
        let ty = h & 0x0f;
        if ty == 0 {
            return Ok(None);
        }
        let delta = i16::from(h >> 4);
        let id = if delta == 0 {
            i16::try_from(self.zigzag()?).map_err(|_| "a malformed field id".to_string())?
        } else {
            last.saturating_add(delta)
        };
        // Writers emit a struct's fields once each, in id order. A repeated field would let
        // parquet-rs keep another value than the one checked here.
        if id <= *last {
            return Err("its metadata repeats a field or has them out of order".into());
        }
        *last = id;
        Ok(Some((id, ty)))
    }

    /// A list header: element type and a count no larger than the bytes left.
    fn list(&mut self) -> R<(u8, usize)> {
        let h = self.byte()?;
        let n = match h >> 4 {
            15 => self.varint()?,
            n => u64::from(n),
        };
        if n > self.remaining() as u64 {
            return Err(format!(
                "its metadata declares a list of {n} items in {} bytes",
                self.remaining()
            ));
        }
        Ok((h & 0x0f, n as usize))
    }

    pub(super) fn struct_list(&mut self) -> R<usize> {
        match self.list()? {
            (T_STRUCT, n) => Ok(n),
            (_, 0) => Ok(0),
            _ => Err("its metadata has a list of the wrong type".into()),
        }
    }

    pub(super) fn skip(&mut self, ty: u8, depth: u32) -> R<()> {
        if depth > THRIFT_DEPTH {
            return Err("its metadata nests deeper than Parquet's".into());
        }
        match ty {
            T_TRUE | T_FALSE => Ok(()),
            T_BYTE => self.byte().map(drop),
            T_I16 | T_I32 | T_I64 => self.varint().map(drop),
            T_DOUBLE => self.advance(8),
            T_UUID => self.advance(16),
            T_BINARY => {
                let n = self.varint()?;
                self.advance(n)
            }
            T_LIST | T_SET => {
                let (elem, n) = self.list()?;
                for _ in 0..n {
                    self.skip_element(elem, depth + 1)?;
                }
                Ok(())
            }
            T_MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                if n > self.remaining() as u64 {
                    return Err(truncated());
                }
                let kv = self.byte()?;
                for _ in 0..n {
                    self.skip_element(kv >> 4, depth + 1)?;
                    self.skip_element(kv & 0x0f, depth + 1)?;
                }
                Ok(())
            }
            T_STRUCT => {
                let mut last = 0;
                while let Some((_, ty)) = self.field(&mut last)? {
                    self.skip(ty, depth + 1)?;
                }
                Ok(())
            }
            _ => Err("its metadata has an unknown thrift type".into()),
        }
    }

    /// A list, set or map element. Parquet's metadata has no collections of booleans, and
    /// readers disagree on their size: refused, so nothing can hide behind them.
    fn skip_element(&mut self, ty: u8, depth: u32) -> R<()> {
        match ty {
            T_TRUE | T_FALSE => Err("its metadata has a collection of booleans".into()),
            ty => self.skip(ty, depth),
        }
    }

    /// Refuse a known field (`id` among `known`) sent with another type than its own.
    pub(super) fn typed(id: i16, ty: u8, known: &[(i16, u8)]) -> R<()> {
        match known.iter().find(|(k, _)| *k == id) {
            Some((_, want)) if *want != ty => {
                Err(format!("its metadata has field {id} of the wrong type"))
            }
            _ => Ok(()),
        }
    }
}

fn truncated() -> Refusal {
    "its metadata ends in the middle of a value".into()
}
