"""N-gram language models on tensors (NGPU-LM): ARPA reading and batched scoring for shallow fusion, and building
LMs from text (interpolated modified Kneser-Ney)."""

from transdec.lm.arpa import Arpa, ArpaError, read_arpa
from transdec.lm.build import LMBuildError, build_lm
from transdec.lm.kneser_ney import KneserNeyLM, estimate
from transdec.lm.ngram import NGramLM, nemo_token_id

__all__ = ["Arpa", "ArpaError", "KneserNeyLM", "LMBuildError", "NGramLM", "build_lm", "estimate", "nemo_token_id",
           "read_arpa"]
