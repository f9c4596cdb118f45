# The two entry points of the repository (see README.md). Both set up what they need first.
.PHONY: demo test setup

PROMPT ?= What is the capital of France?

setup:
	@scripts/setup.sh

demo: setup
	@if [ ! -x scripts/demo.sh ]; then \
	  echo "make demo: the host LLM runner has not landed yet (scripts/demo.sh is missing); nothing to run." >&2; \
	  exit 1; \
	fi
	@scripts/demo.sh "$(PROMPT)"

test: setup
	@scripts/test.sh
