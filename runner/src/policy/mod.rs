//! The policy engine: who may call what, with which secrets, in which environment, and what is recorded.
