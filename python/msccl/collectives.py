"""msccl.collectives: the collectives of msccl.language.collectives under the
name some MSCCLang programs also import."""

from msccl.language.collectives import (AllGather, AllReduce, AllToAll, Collective,  # noqa: F401
                                        ReduceScatter)
