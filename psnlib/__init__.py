"""psnlib: parameter-space noise and weak-model guidance for RLVR, replicated."""

__version__ = "0.1.0"
