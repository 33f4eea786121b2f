// placeholder until the plugin lands
