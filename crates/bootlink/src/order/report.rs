//! What an order should save, predicted from the symbol table: the pages
//! (and storage blocks of a few sizes) the startup functions occupy in the
//! file now, and after they are laid out one after the other in call order
//! at the start of the code (16-byte aligned, as GCC aligns functions).

use std::collections::BTreeSet;

use serde::Serialize;

use super::symbols::Function;

/// Block sizes reported: the page, and the SquashFS block sizes the lab compares.
pub(crate) const BLOCKS: [u64; 4] = [4096, 16 << 10, 64 << 10, 128 << 10];
const ALIGN: u64 = 16;

#[derive(Debug, Clone, Serialize)]
pub struct Blocks {
    pub block: u64,
    pub before: usize,
    pub after: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    pub functions: usize,
    pub bytes: u64,
    pub blocks: Vec<Blocks>,
}

pub(crate) fn touched(spans: impl Iterator<Item = (u64, u64)>, block: u64) -> usize {
    let mut set = BTreeSet::new();
    for (off, size) in spans {
        for b in off / block..=(off + size.max(1) - 1) / block {
            set.insert(b);
        }
    }
    set.len()
}

/// `funcs`: the startup functions in call order, as the binary lays them out now.
pub(crate) fn predict(funcs: &[&Function]) -> Prediction {
    let start = funcs.iter().map(|f| f.file_off).min().unwrap_or(0);
    let mut after = Vec::with_capacity(funcs.len());
    let mut at = start;
    for f in funcs {
        at = at.next_multiple_of(ALIGN);
        after.push((at, f.size));
        at += f.size;
    }
    let blocks = BLOCKS
        .iter()
        .map(|&block| Blocks {
            block,
            before: touched(funcs.iter().map(|f| (f.file_off, f.size)), block),
            after: touched(after.iter().copied(), block),
        })
        .collect();
    Prediction { functions: funcs.len(), bytes: funcs.iter().map(|f| f.size).sum(), blocks }
}

impl Prediction {}

impl crate::report::Report for Prediction {
    fn render(&self) -> String {
        let mut t = crate::table::Table::new(&["block", "touched now", "after the order", "saved"]);
        for b in &self.blocks {
            t.row(vec![
                format!("{} KiB", b.block / 1024),
                b.before.to_string(),
                b.after.to_string(),
                format!("{:.1}x", b.before as f64 / b.after.max(1) as f64),
            ]);
        }
        format!("{} startup functions, {} bytes of code\n{}", self.functions, self.bytes, t.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::symbols::FunctionId;

    #[test]
    fn scattered_functions_pack_into_one_page() {
        let f = |i: u64| Function {
            id: FunctionId { name: format!("f{i}"), file: None },
            addr: 0x1000 + i * 8192,
            size: 100,
            file_off: 0x1000 + i * 8192,
        };
        let fs: Vec<Function> = (0..10).map(f).collect();
        let refs: Vec<&Function> = fs.iter().collect();
        let p = predict(&refs);
        assert_eq!(p.blocks[0].before, 10);
        assert_eq!(p.blocks[0].after, 1);
        assert_eq!(p.bytes, 1000);
    }
}
