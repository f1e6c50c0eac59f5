"""N-gram language models on tensors (NGPU-LM): ARPA reading and batched scoring for shallow fusion."""

from transdec.lm.arpa import Arpa, ArpaError, read_arpa
from transdec.lm.ngram import NGramLM, nemo_token_id

__all__ = ["Arpa", "ArpaError", "NGramLM", "nemo_token_id", "read_arpa"]
