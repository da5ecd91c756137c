"""Well-known developer tools: the packages and scopes everybody installs (``typescript``, ``ruff``,
``@types/*`` ...). Shared by the path rules (a global install of a well-known tool is not a change to
the machine worth a decline) and the supply-chain pack (running one with ``npx``/``uvx`` is expected).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["NPM_SCOPES", "NPM_TOOLS", "PY_TOOLS", "package_name", "well_known"]

NPM_TOOLS = frozenset((
    "typescript", "tsc", "ts-node", "tsx", "esbuild", "vite", "vitest", "jest", "mocha", "ava", "nyc", "c8",
    "eslint", "prettier", "stylelint", "biome", "oxlint", "rollup", "webpack", "webpack-cli", "parcel",
    "turbo", "nx", "lerna", "next", "nuxi", "nuxt", "astro", "sv", "svelte-check", "vue-tsc",
    "react-scripts", "expo", "react-native", "playwright", "cypress", "puppeteer", "prisma", "drizzle-kit",
    "typeorm", "sequelize-cli", "knex", "wrangler", "vercel", "netlify-cli", "firebase-tools", "serverless",
    "aws-cdk", "cdk", "tailwindcss", "postcss", "postcss-cli", "autoprefixer", "sass", "less", "storybook",
    "http-server", "serve", "live-server", "concurrently", "nodemon", "pm2", "rimraf", "cross-env",
    "dotenv-cli", "npm-check-updates", "ncu", "depcheck", "knip", "madge", "license-checker",
    "semantic-release", "changeset", "commitlint", "husky", "lint-staged", "degit", "tiged", "json-server",
    "markdownlint-cli", "markdownlint-cli2", "cspell", "typedoc", "jsdoc", "openapi-typescript",
    "swagger-cli", "graphql-codegen", "node-gyp", "patch-package", "npm", "pnpm", "yarn", "corepack", "zx",
    "tsup", "unbuild", "microbundle", "size-limit", "pkg", "vsce", "ovsx", "electron", "electron-builder",
    "gh-pages", "shx", "mkdirp", "copyfiles", "npm-run-all", "run-p", "run-s", "wait-on", "kill-port",
    "dprint", "shadcn", "shadcn-ui", "ts-jest", "jest-cli", "create-react-app", "create-next-app",
    "create-vite", "create-vue", "create-svelte", "create-astro", "create-t3-app", "create-remix",
    "create-expo-app", "create-nx-workspace", "create-turbo", "create-solid", "create-qwik",
    "create-docusaurus", "create-hono", "create-electron-app", "create-react-native-app",
    "create-strapi-app", "create-nuxt-app", "create-redwood-app", "create-payload-app", "create-vite-app",
    "create-analog", "create-playwright", "create-storybook", "create-react-router", "create-rsbuild",
    "create-rspack", "create-tauri-app", "create-wasm-app", "pyright", "html-validate", "htmlhint",
    "@biomejs/biome", "@tailwindcss/cli", "@playwright/test", "@prisma/client", "@vscode/vsce",
    "@redocly/cli", "@changesets/cli", "@commitlint/cli", "@graphql-codegen/cli", "@angular/cli",
    "@vue/cli", "@nestjs/cli", "@storybook/cli", "@openapitools/openapi-generator-cli",
    "@anthropic-ai/claude-code", "@openai/codex", "@modelcontextprotocol/inspector", "@astrojs/check",
    "@sveltejs/kit", "@expo/cli", "@react-native-community/cli", "@aws-amplify/cli", "@cloudflare/wrangler",
    "@vercel/ncc", "@tauri-apps/cli", "netlify", "firebase", "svelte-kit", "ng", "jscodeshift",
    "sort-package-json", "envinfo", "is-ci", "standard", "xo", "tap", "uvu", "jasmine", "karma", "svgo",
    "imagemin", "imagemin-cli", "terser", "uglify-js", "babel", "@babel/cli", "@babel/core", "swc",
    "@swc/cli", "@swc/core", "tailwind", "eslint-config-prettier", "prettier-plugin-tailwindcss",
    "playwright-core", "@playwright/mcp", "@modelcontextprotocol/server-filesystem",
    "@modelcontextprotocol/server-github", "yo", "generator-code", "plop", "hygen", "np", "release-it",
    "auto-changelog", "conventional-changelog-cli", "standard-version", "commitizen", "cz", "git-cz",
    "all-contributors-cli", "doctoc", "markdown-toc", "remark-cli", "textlint", "alex", "write-good",
    "prettier-eslint", "eslint_d", "prettierd", "tslint", "tslib", "ts-prune", "ts-unused-exports",
    "type-coverage", "typesync", "@arethetypeswrong/cli", "publint", "attw", "syncpack", "manypkg",
    "@manypkg/cli", "pnpm-sync", "nx-cloud", "@nx/workspace", "create-nx-plugin", "verdaccio",
    "local-web-server", "browser-sync", "lite-server", "light-server", "ws", "wscat", "websocat",
    "localtunnel-not", "servor", "sirv", "sirv-cli", "vite-node", "vitepress", "vuepress", "docusaurus",
    "@docusaurus/core", "gatsby", "gatsby-cli", "@remix-run/dev", "remix", "hydrogen", "@shopify/cli",
    "shopify", "solid-start", "qwik", "@builder.io/qwik", "@sveltejs/package", "svelte-migrate",
    "@vitejs/create-app", "create-vite-extra", "create-electron-vite", "electron-forge",
    "@electron-forge/cli", "electron-packager", "electron-rebuild", "@electron/rebuild", "nexe", "supabase",
    "@supabase/cli", "prisma-nestjs-graphql", "@prisma/migrate", "knex-migrate", "db-migrate",
    "node-pg-migrate", "@mikro-orm/cli", "kysely-codegen", "@graphql-inspector/cli", "graphql-inspector",
    "apollo", "@apollo/rover", "rover", "get-graphql-schema", "openapi-generator-cli",
    "swagger-typescript-api", "orval", "@hey-api/openapi-ts", "openapi-zod-client",
    "json-schema-to-typescript", "quicktype", "ajv-cli", "rome", "eslint-plugin-react",
    "jest-environment-jsdom", "@jest/core", "babel-jest", "@vitest/ui", "happy-dom", "jsdom",
    "mocha-lcov-reporter", "istanbul", "codecov", "@codecov/cli", "coveralls", "snyk", "@snyk/cli",
    "audit-ci", "better-npm-audit", "npm-audit-resolver", "retire", "lockfile-lint",
    "license-checker-rseidelsohn", "check-engines", "engines-check", "node-version-check", "nvm", "n",
    "volta", "fnm", "bun", "deno", "miniflare", "amplify", "sls", "aws-cdk-lib", "cdktf-cli", "cdktf",
    "@pulumi/pulumi", "pulumi", "azure-functions-core-tools", "func", "@azure/static-web-apps-cli", "swa",
    "@google-cloud/functions-framework", "expo-cli", "eas-cli", "@expo/ngrok", "react-native-cli",
    "react-devtools", "chromatic", "lost-pixel", "@percy/cli", "percy", "backstopjs", "pa11y", "pa11y-ci",
    "lighthouse", "@lhci/cli", "lhci", "axe-core", "@axe-core/cli", "unlighthouse", "bundlesize",
    "webpack-bundle-analyzer", "source-map-explorer", "vite-bundle-visualizer", "@next/bundle-analyzer",
    "rollup-plugin-visualizer", "depcruise", "dependency-cruiser", "npm-check", "taze", "updates",
    "renovate", "@renovate/cli", "dotenv", "env-cmd", "dotenv-vault", "del-cli", "trash-cli", "cpy-cli",
    "cpx", "ncp", "make-dir-cli", "chokidar-cli", "onchange", "ts-node-dev", "esno", "esrun", "jiti",
    "bun-types", "tsc-watch", "tsc-alias", "tsconfig-paths", "ts-patch", "@typescript/native-preview",
    "ttypescript", "pkg-pr-new"
))  # fmt: skip
NPM_SCOPES = frozenset(
    {"@angular", "@nestjs", "@nx", "@nrwl", "@storybook", "@playwright", "@prisma", "@biomejs", "@vue"}
    | {"@tailwindcss", "@sveltejs", "@astrojs", "@redocly", "@graphql-codegen", "@changesets", "@expo"}
    | {"@commitlint", "@modelcontextprotocol", "@vscode", "@aws-amplify", "@cloudflare", "@vercel"}
    | {"@netlify", "@react-native-community", "@ionic", "@capacitor", "@remix-run", "@tanstack"}
    | {"@anthropic-ai", "@openai", "@tauri-apps", "@microsoft", "@google-cloud", "@azure", "@aws-sdk"}
    | {
        "@babel",
        "@swc",
        "@types",
        "@typescript-eslint",
        "@eslint",
        "@vitejs",
        "@vitest",
        "@jest",
        "@testing-library",
    }
    | {
        "@electron",
        "@electron-forge",
        "@shopify",
        "@supabase",
        "@apollo",
        "@graphql-inspector",
        "@docusaurus",
    }
    | {"@lhci", "@percy", "@axe-core", "@next", "@nuxt", "@astrojs", "@solidjs", "@builder.io", "@mikro-orm"}
    | {"@hey-api", "@redwoodjs", "@strapi", "@sentry", "@datadog", "@stoplight", "@arethetypeswrong"}
)
PY_TOOLS = frozenset((
    "ruff", "black", "isort", "mypy", "pyright", "basedpyright", "pylint", "flake8", "pytest", "tox", "nox",
    "pre-commit", "poetry", "pdm", "hatch", "twine", "build", "cookiecutter", "copier", "httpie",
    "pipdeptree", "pip-tools", "pip-audit", "bandit", "safety", "coverage", "sphinx", "mkdocs", "jupyter",
    "jupyterlab", "ipython", "uv", "ty", "vulture", "radon", "semgrep", "yamllint", "codespell",
    "commitizen", "bump-my-version", "towncrier", "pyupgrade", "autoflake", "docformatter", "sqlfluff",
    "ansible", "ansible-lint", "cfn-lint", "checkov", "pgcli", "litecli", "mycli", "datasette", "marimo",
    "streamlit", "pyinstaller", "nuitka", "maturin", "cibuildwheel", "virtualenv", "pipenv", "pipx",
    "rich-cli",
    "tldr", "hatchling", "setuptools", "wheel", "pip", "check-manifest", "interrogate", "pydocstyle",
    "pycodestyle", "autopep8", "yapf", "mdformat", "djlint", "sqlfmt", "dbt-core", "pip-licenses", "deptry",
    "markitdown", "llm", "showboat", "httpx", "rich", "textual", "pdm-backend", "hatch-vcs",
    "setuptools-scm", "scikit-build-core", "meson", "ninja", "cmake", "conan", "poethepoet", "poe",
    "invoke", "fabric", "doit", "taskipy", "nbqa", "nbstripout", "jupytext", "papermill", "voila", "panel",
    "bokeh", "dash", "gradio", "uvicorn", "gunicorn", "hypercorn", "fastapi", "litestar", "flask",
    "django-admin", "alembic", "sqlalchemy-utils", "harlequin", "csvkit", "visidata", "xonsh", "ptpython",
    "bpython", "ipdb", "pudb", "py-spy", "scalene", "memray", "pyinstrument", "snakeviz", "line-profiler",
    "austin", "locust", "pytest-xdist", "pytest-cov", "hypothesis", "mutmut", "cosmic-ray", "tox-uv",
    "nox-uv", "hatch-fancy-pypi-readme", "pyproject-fmt", "validate-pyproject", "tomlkit", "toml-sort",
    "taplo", "yq", "jc", "jq", "httpie-cli", "xh", "pyupgrade-directories", "flynt", "refurb", "pylyzer",
    "ruff-lsp", "python-lsp-server", "jedi-language-server", "pyre-check", "pytype", "mypy-extensions",
    "monkeytype", "stubgen", "basedmypy", "auditwheel", "delocate", "check-wheel-contents", "pyroma",
    "wheel-inspect", "pipenv-setup", "pip-check", "pip-review", "pip-upgrader", "uv-secure",
    "cyclonedx-bom", "cyclonedx-py", "sbom4python", "detect-secrets", "trufflehog", "gitleaks",
    "pre-commit-hooks", "sphinx-autobuild", "sphinx-build", "mkdocs-material", "pdoc", "pydoc-markdown",
    "griffe", "lazydocs", "mike", "cruft", "gitpython", "datamodel-code-generator", "openapi-python-client",
    "schemathesis", "kaggle", "huggingface-hub", "huggingface_hub", "transformers-cli", "modal",
    "aider-chat", "aider", "open-interpreter", "sqlite-utils", "shot-scraper", "files-to-prompt", "ttok",
    "strip-tags", "csvs-to-sqlite"
))  # fmt: skip


def package_name(spec: str) -> str:
    """``@scope/name@1.2`` -> ``@scope/name``; ``name@latest`` -> ``name``."""
    if spec.startswith("@"):
        scope, _, rest = spec.partition("/")
        return f"{scope}/{rest.split('@', 1)[0]}" if rest else scope
    return spec.split("@", 1)[0]


def well_known(packages: Sequence[str]) -> bool:
    """Are all of ``packages`` (install specs) well-known tools (``pnpm``, ``typescript@5``, ``ruff``)?"""
    names = [
        package_name(p) if p.startswith("@") else re.split(r"[=<>!~\[@ ]", p, maxsplit=1)[0] for p in packages
    ]
    known = NPM_TOOLS | PY_TOOLS
    return bool(names) and all(
        n in known or n.lower() in known or n.split("/")[0] in NPM_SCOPES for n in names
    )
