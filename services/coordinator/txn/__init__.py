"""The transaction coordinator (KIP-98 with KIP-890's epoch bump): the state machine, the
metadata per transactional.id and the pure builders of every change."""
