#!/usr/bin/env python3
"""Writes seeds for fuzz_cfi from a real ELF object: the PT_LOAD segment
that holds its .eh_frame_hdr (and so its .eh_frame), with lookups of the
first, a middle and the last function of the table, and of an address
before them all.

    tests/fuzz/mkseed_cfi.py ELF OUTDIR
"""
import os
import struct
import sys


def main():
    path, out = sys.argv[1], sys.argv[2]
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit("%s: not a 64-bit ELF file" % path)
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    phdrs = [struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize) for i in range(phnum)]
    eh = [p for p in phdrs if p[0] == 0x6474e550]  # PT_GNU_EH_FRAME
    if not eh:
        sys.exit("%s: no PT_GNU_EH_FRAME" % path)
    hdr_vaddr = eh[0][3]
    seg = [p for p in phdrs if p[0] == 1 and p[3] <= hdr_vaddr < p[3] + p[6]][0]
    _, _, off, vaddr, _, filesz, _, _ = seg
    body = data[off:off + filesz]
    hdr = hdr_vaddr - vaddr
    count, = struct.unpack_from("<i", body, hdr + 8)  # udata4 count after eh_frame_ptr
    tab = hdr + 12
    entries = [struct.unpack_from("<ii", body, tab + 8 * i) for i in range(count)]
    picks = {"first": entries[0][0] + 1, "middle": entries[count // 2][0] + 4,
             "last": entries[-1][0] + 2, "before": entries[0][0] - 16}
    os.makedirs(out, exist_ok=True)
    name = os.path.basename(path)
    for what, rel in picks.items():
        with open(os.path.join(out, "%s-%s.bin" % (name, what)), "wb") as f:
            f.write(struct.pack("<Ii", hdr, rel) + body)


if __name__ == "__main__":
    main()
