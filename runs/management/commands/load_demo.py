from django.core.management.base import BaseCommand

from runs.demo import DEMO_USERS, demo_load


class Command(BaseCommand):
    help = "Load the demo: CRM data, tools, roles, users, policies, skills and the crm-assistant agent."

    def handle(self, *args, **options):
        result = demo_load()
        self.stdout.write(self.style.SUCCESS(
            f"Demo loaded: crm-assistant v{result['agent_version']}, skills {', '.join(result['skills'])}"))
        for name in result.get("skills_held", []):
            self.stdout.write(self.style.WARNING(
                f"Skill {name} not put in force: the golden set does not pass with it (see the eval run of its gate)"))
        self.stdout.write(result["model"])
        if result["users_created"]:
            self.stdout.write(f"Created users: {', '.join(result['users_created'])}")
        self.stdout.write("Demo logins (password 'warrant-demo' unless DEMO_PASSWORD was set when they were created):")
        for username, roles in DEMO_USERS.items():
            self.stdout.write(f"  {username:<11} roles: {', '.join(roles)}")
        self.stdout.write("API token: make -s token USER=operator  (or: manage.py issue_token operator)")
