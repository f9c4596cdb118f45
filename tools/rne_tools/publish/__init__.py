"""Publish verified model variants to Hugging Face and fetch them back, checked.

- ``plan_publish`` / ``publish``: upload a model's verified exports with their encoders, the
  tokenizer and a model card in one commit, tag it, then record checksums in the registry and
  regenerate the TypeScript.
- ``download_variant``: fetch a published variant (and its published encoders) at its pinned
  revision, verifying sha256/size.
- ``render_model_card``: the README.md of a model repository.
"""

from rne_tools.publish.download import DownloadedVariant, download_variant
from rne_tools.publish.errors import DownloadError, PublishError
from rne_tools.publish.model_card import CardEncoder, CardVariant, render_model_card
from rne_tools.publish.publisher import PublishPlan, PublishResult, plan_publish, publish

__all__ = [
    "CardEncoder",
    "CardVariant",
    "DownloadError",
    "DownloadedVariant",
    "PublishError",
    "PublishPlan",
    "PublishResult",
    "download_variant",
    "plan_publish",
    "publish",
    "render_model_card",
]
