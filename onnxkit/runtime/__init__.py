"""Evaluation (Clause 8): planning, the run loop, sessions, and the kernel contract for backends."""

from .kernel import KernelTable, NodeContext, Unsupported, needs_scope
from .session import InferenceSession, InputError, NodeArg, run_model

__all__ = ["InferenceSession", "InputError", "KernelTable", "NodeArg", "NodeContext", "Unsupported", "needs_scope", "run_model"]
