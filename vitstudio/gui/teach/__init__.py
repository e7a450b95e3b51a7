"""The Teach tab: classes as cards, samples from files, folders or frames held to record, a head refitted
in the background after each change, and a live preview of the per-class probabilities. Its model is
vitstudio/app/teach_state.py; the work is core/teach/."""
