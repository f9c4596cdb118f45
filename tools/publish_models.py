#!/usr/bin/env python3
"""Publish verified model variants to their Hugging Face repository and record them in the registry.

python tools/publish_models.py --model smollm2_135m --revision v0.1.0 --exports-dir exports/ --dry-run
python tools/publish_models.py --model gemma4_e2b --variant xnnpack --revision v0.2.0 \\
    --exports-dir exports/ --tokenizer-dir CHECKPOINT_DIR

A variant that lists encoders (`encoders: {vision: ..., audio: ...}`) is published with them: each
encoder's export (tools/export_encoder.py) must be in --exports-dir, named after its registry path.
A variant that declares an assistant drafter (`assistant: {path: ..., verify_tokens: K}`) is
published with it: the variant exported with --assistant and --verify-tokens K, in
--assistant-exports-dir (the exporter names it as the plain export).

The token comes from the standard Hugging Face sources (HF_TOKEN, then `hf auth login`) and is
never printed. Against a Hub-compatible server without Xet storage, set HF_HUB_DISABLE_XET=1 so
the client uploads through git LFS.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rne_tools.errors import RneError
from rne_tools.paths import REGISTRY_DIR
from rne_tools.publish import PublishPlan, plan_publish, publish
from rne_tools.registry import codegen


def _default_tokenizer_dir(model_id: str, registry_dir: Path) -> Path:
    from rne_tools.errors import ExportError
    from rne_tools.gguf_import import default_checkpoint

    try:
        return default_checkpoint(model_id, registry_dir=registry_dir)
    except ExportError:  # the registry's source is not one the tooling imports by itself
        raise click.UsageError(
            f"--tokenizer-dir is required for {model_id}: pass the checkpoint directory the "
            "variants were exported from (it holds tokenizer.json and tokenizer_config.json)"
        ) from None


def _describe(plan: PublishPlan) -> None:
    click.echo(f"{plan.model.id} -> {plan.repo} @ {plan.revision}")
    for e in plan.exports:
        click.echo(f"  {e.backend:8} {e.pte.name}  {e.size} bytes  sha256 {e.sha256}")
        click.echo(f"           verification: {e.verification}")
    for c in plan.encoders:
        click.echo(f"  {c.kind:8} {c.pte.name} -> {c.path}  {c.size} bytes  sha256 {c.sha256}")
        click.echo(f"           verification: {c.verification}")
    for a in plan.assistants:
        click.echo(
            f"  {'drafter':8} {a.export.pte} -> {a.path}  {a.size} bytes  sha256 {a.sha256}"
        )
        click.echo(f"           verification: {a.draft_check}")
    for f in plan.files()[len(plan.exports) + len(plan.encoders) + len(plan.assistants) :]:
        click.echo(f"  {f.path}  {f.size} bytes  sha256 {f.sha256}")


@click.command()
@click.option("--model", "model_id", required=True, help="Registry model id, e.g. smollm2_135m.")
@click.option(
    "--variant",
    "backends",
    multiple=True,
    help="Backend variant to publish (repeatable). Default: every variant of the model.",
)
@click.option("--revision", required=True, help="Release tag to create, e.g. v0.1.0.")
@click.option(
    "--endpoint",
    default=None,
    help="Hugging Face endpoint (default: HF_ENDPOINT or https://huggingface.co).",
)
@click.option(
    "--exports-dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory of <model>_<backend>_<quant>.pte and .report.json (export_model.py "
    "--output-dir), and of the encoders the variants list, named after their registry paths "
    "(<stem>.pte or <stem>_<budget>.pte with .report.json, export_encoder.py --output-dir).",
)
@click.option(
    "--assistant-exports-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory of the exports with the assistant drafter (export_model.py --assistant "
    "--verify-tokens K --output-dir) of the variants that declare one (default: "
    "<exports-dir>/assistant).",
)
@click.option(
    "--tokenizer-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Checkpoint directory with the tokenizer files (default: the registry source's, where "
    "the tooling imports it offline).",
)
@click.option(
    "--registry-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=REGISTRY_DIR,
    show_default=True,
    help="Directory of the family YAML files to update.",
)
@click.option(
    "--ts-output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=codegen.GENERATED_TS,
    help="Generated TypeScript file to rewrite.",
)
@click.option(
    "--dry-run", is_flag=True, help="Check and show what would be published; upload nothing."
)
@click.option(
    "--allow-random-weights",
    is_flag=True,
    help="Accept exports of random-weight test configs (to test publishing; never a release).",
)
def main(
    model_id: str,
    backends: tuple[str, ...],
    revision: str,
    endpoint: str | None,
    exports_dir: Path,
    assistant_exports_dir: Path | None,
    tokenizer_dir: Path | None,
    registry_dir: Path,
    ts_output: Path,
    dry_run: bool,
    allow_random_weights: bool,
) -> None:
    """Publish verified variants of a model to Hugging Face, then update the registry."""
    try:
        plan = plan_publish(
            model_id,
            revision,
            exports_dir,
            tokenizer_dir or _default_tokenizer_dir(model_id, registry_dir),
            backends=backends or None,
            registry_dir=registry_dir,
            allow_random_weights=allow_random_weights,
            assistant_exports_dir=assistant_exports_dir,
        )
        _describe(plan)
        if dry_run:
            click.echo("dry run: nothing uploaded, registry unchanged")
            return
        result = publish(plan, endpoint=endpoint, registry_dir=registry_dir, ts_output=ts_output)
    except RneError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(
        f"{'committed' if result.new_commit else 'no changes to commit'}: {result.repo} "
        f"{result.commit[:12]}; tag {result.revision} "
        f"{'created' if result.new_tag else 'already held these files'}; registry "
        f"{'updated' if result.registry_changed else 'unchanged'}"
    )


if __name__ == "__main__":
    main()
