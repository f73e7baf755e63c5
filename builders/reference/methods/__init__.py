"""The reference engine's side of each speculative method, one module per method (a plug-in folder).

Lives here: parts (the DecoderParts every factory takes); each other module is named as its method (the mode) and defines make_decoder, which the method's reference_decoder names, and may define build's hooks check_models (its model dirs checked) and build_notes (its lines of build.json's reference notes).
May import: core, spec, builders.reference, builders.medusa_tree.
"""
