"""Every figure, drawn from the results files only, and how the manuscript embeds them."""
