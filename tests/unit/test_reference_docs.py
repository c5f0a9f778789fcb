"""docs/reference.md is generated from the code: it must be current, and nothing in it may lack a
description (every run setting, pipeline-file key and operator or sensor parameter)."""

from __future__ import annotations

from mysqlcdc_harness import reference


def test_the_reference_page_is_what_the_code_says():
    current = reference.TARGET.read_text(encoding="utf-8")
    assert current == reference.render(), "docs/reference.md is stale. Fix: python -m mysqlcdc_harness.reference"


def test_every_setting_key_and_parameter_has_a_description():
    assert reference.undocumented() == []


def test_the_reference_counts_every_setting_file_key_and_parameter():
    from airflow_provider_mysqlcdc.cdc.settings import SETTINGS
    from airflow_provider_mysqlcdc.pipelines.spec import FILE_KEYS

    text = reference.TARGET.read_text(encoding="utf-8")
    assert all(f"| `{s.name}` |" in text for s in SETTINGS), "a setting is missing"
    assert all(f"`{section}.{key}`" in text for section, key in FILE_KEYS.values()), "a file key is missing"
    for cls in reference.operators():
        names = [n for n, _, _ in reference.operator_params(cls)]
        assert names and all(f"| `{n}` |" in text for n in names), cls.__name__
    assert len(SETTINGS) >= 20 and sum(len(list(reference.operator_params(c))) for c in reference.operators()) >= 80


def test_a_param_line_that_names_several_parameters_documents_each():
    class Op:
        """Does things.

        :param a, b: both of them,
            on two lines.
        :param c: one.
        """

        def __init__(self, a: int, b: int = 1, c: str = "", **kwargs: object) -> None: ...

    got = {n: (d, t) for n, d, t in reference.operator_params(Op)}
    assert got == {
        "a": ("required", "both of them, on two lines."),
        "b": ("`1`", "both of them, on two lines."),
        "c": ("empty", "one."),
    }


def test_the_docs_pages_say_what_the_dags_docs_tab_says():
    """Each DAG docs block (pipelines/dag_docs.py) is on a docs page, as the DAG template renders it."""
    from airflow_provider_mysqlcdc.pipelines import dag_docs

    for page in reference.DAG_DOC_PAGES:
        text = page.read_text(encoding="utf-8")
        assert text == reference.with_dag_doc_blocks(text), (
            f"{page.name} is stale. Fix: python -m mysqlcdc_harness.reference"
        )
    shown = {
        n for page in reference.DAG_DOC_PAGES for n in reference.dag_doc_blocks_in(page.read_text(encoding="utf-8"))
    }
    assert shown == set(dag_docs.BLOCKS), f"blocks on no docs page: {sorted(set(dag_docs.BLOCKS) - shown)}"


def test_the_dags_docs_tab_is_built_from_the_same_blocks():
    from airflow_provider_mysqlcdc.pipelines import dag_builder, dag_docs

    dags = dag_builder.build_pipeline_dags("shop_orders", settings={"tables": ["shop.orders", "shop.items"]})
    pipeline, watchdog = dags[0], dags[1]
    for name in ("rerun", "reset"):
        assert dag_docs.render(name) in pipeline.doc_md
    values = {"loads": "`shop.orders`, `shop.items`", "watchdog_dag_id": watchdog.dag_id}
    assert dag_docs.render("start", {**values, "sink": "a Delta Lake"}) in pipeline.doc_md
    assert dag_docs.render("watchdog", {"dag_id": pipeline.dag_id}) in watchdog.doc_md
