from django.db import migrations, models


def seal_existing(apps, schema_editor):
    # Tokens issued since 0004 get the seal the server would have given them.
    from governance.tokens import token_seal

    for token in apps.get_model("governance", "ApiToken").objects.filter(seal=""):
        token.seal = token_seal(public_id=token.public_id, digest=token.digest, user_id=token.user_id,
                                expires_at=token.expires_at)
        token.save(update_fields=["seal"])


class Migration(migrations.Migration):

    dependencies = [
        ('governance', '0004_api_tokens'),
    ]

    operations = [
        migrations.AddField(
            model_name='apitoken',
            name='seal',
            field=models.CharField(blank=True, editable=False, help_text="HMAC under the server's SECRET_KEY of id, digest, owner and expiry (governance.tokens): a row written or edited outside Warrant, by someone holding only the database, does not authenticate.", max_length=64),
        ),
        migrations.RunPython(seal_existing, migrations.RunPython.noop),
    ]
