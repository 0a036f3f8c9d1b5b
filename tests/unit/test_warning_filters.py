"""The test run's warning filters (pyproject.toml): MemLineage's own warnings fail a test, third-party noise is
filtered by exact category and module only."""

from __future__ import annotations

import warnings

import pytest
from pydantic.warnings import PydanticDeprecatedSince20


def _warn_from(module: str, category: type[Warning], message: str = "probe") -> None:
    # warn_explicit applies the active filters as if `module` had issued the warning.
    warnings.warn_explicit(message, category, filename=f"{module.replace('.', '/')}.py", lineno=1, module=module)


@pytest.mark.parametrize(
    "module", ["memlineage", "memlineage.services.write", "memlineage_langchain._memory", "memlineage_llamaindex"]
)
@pytest.mark.parametrize("category", [UserWarning, DeprecationWarning, RuntimeWarning])
def test_a_warning_from_memlineage_code_is_an_error(module: str, category: type[Warning]) -> None:
    with pytest.raises(category, match="probe"):
        _warn_from(module, category)


def test_other_modules_warnings_are_not_errors() -> None:
    with pytest.warns(UserWarning, match="probe"):
        _warn_from("memlineage_extra_plugin", UserWarning)
    with pytest.warns(UserWarning, match="probe"):
        _warn_from("somelib", UserWarning)


def test_third_party_noise_is_filtered_by_category_and_module_only() -> None:
    with warnings.catch_warnings(record=True) as caught:
        _warn_from("inspect", PydanticDeprecatedSince20)  # llama-index-workflows' inspect.getmembers
    assert caught == []
    # The same category from anywhere else is still shown.
    with pytest.warns(PydanticDeprecatedSince20):
        _warn_from("somelib", PydanticDeprecatedSince20)
