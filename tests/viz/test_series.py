"""An interval session's charts: one per figure the series gives (throughput, mean
acceptance length, each draft position's acceptance, KV use and prefix hits), none for a
figure no interval gives, each a self-contained SVG."""

from viz.series import series_svg


def test_a_chart_per_figure_given_none_for_the_rest() -> None:
    payloads = [{"generation_tps": 30.0, "prompt_tps": 400.0, "mean_accept_len": 2.1,
                 "acc_per_pos": [0.9, 0.3], "kv_usage": 0.1, "prefix_hit_rate": None},
                {"generation_tps": 35.0, "prompt_tps": 0.0, "mean_accept_len": None,
                 "acc_per_pos": None, "kv_usage": 0.2, "prefix_hit_rate": None}]
    charts = series_svg([0.0, 1.0], payloads)
    assert len(charts) == 4 and all(c.startswith("<svg") and c.endswith("</svg>")
                                    for c in charts)
    assert "position 2" in charts[2] and "prefix hits" not in charts[3]
    plain = series_svg([0.0], [{"generation_tps": 5.0}])
    assert len(plain) == 1 and "throughput" in plain[0]
