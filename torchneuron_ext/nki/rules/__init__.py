"""The compiler's rules: kernels AWS's toolchain rejects are rejected here, with its error codes.

One module per family (docs/nki.md, "Compiler rules"): ``dependencies`` (independent iterations of the
legacy ``affine_range``), ``frontend`` (the front end's language rules), ``instructions`` (per-instruction
dtype and memory rules of the ISA reference), ``allocation`` (directly allocated kernels and the indirect
DMA forms), ``control_flow`` (truth values of tensors, do-while loops), ``masks`` (affine mask
expressions), ``annotations`` (annotated tensor shapes). The simulator's shared modules call them through
one-line hooks; this package imports nothing so that any of them can.
"""
