"""mianjing (面经): LLM / AI-infra interview questions whose claims are backed by executable checks."""

__version__ = "0.1.0"
