"""MSCCLang's module names, provided by Chorus (docs/python.md): programs
written for msccl-tools import msccl.language, msccl.language.collectives
and msccl.topologies and run unchanged, compiled and proven by Chorus."""
