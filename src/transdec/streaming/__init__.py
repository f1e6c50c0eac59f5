"""Streaming recognition: audio streams decoded as they arrive, many in one batch (:class:`Recognizer`)."""

from transdec.streaming.encoders import BufferedEncoder, BufferedOptions, EncoderStream, StreamingEncoder
from transdec.streaming.endpoint import EndpointOptions, EndpointRule
from transdec.streaming.recognizer import Recognizer, Segment, Stream, StreamingOptions

__all__ = ["BufferedEncoder", "BufferedOptions", "EncoderStream", "EndpointOptions", "EndpointRule", "Recognizer",
           "Segment", "Stream", "StreamingEncoder", "StreamingOptions"]
