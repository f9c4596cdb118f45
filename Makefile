# The two entry points of the repository (see README.md). Both set up what they need first.
.PHONY: demo test setup

PROMPT ?= What is the capital of France?

setup:
	@scripts/setup.sh

demo: setup
	@scripts/demo.sh "$(PROMPT)"

test: setup
	@scripts/test.sh
