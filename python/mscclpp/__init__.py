"""MSCCL++'s module names over Chorus (docs/python.md, "MSCCL++ programs").

Only the DSL, ``mscclpp.language``: programs written for MSCCL++ print an
execution plan that Chorus has proven (``print(JSON())``). MSCCL++'s
runtime (communicators, its Executor) is not here: Chorus runs plans
itself (``chorus run plan.json``, the C API, the NCCL drop-in).
"""
